package synchronized_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/synchronized"
)

// TestJSONMiddleware: the lock name comes from fields of the JSON body,
// escaped as path values are; the handler reads the whole body; a body
// that is malformed, not an object, oversized or lacks the field gets a
// clear 400 or 413 and the handler does not run.
func TestJSONMiddleware(t *testing.T) {
	t.Parallel()
	m, _ := newMutex(t)
	mw, err := synchronized.JSONMiddleware("order:{order_id}:{customer.id}", synchronized.Options{Mutex: m, MaxBodyBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /pay", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		_, _ = io.WriteString(w, synchronized.LockFrom(r.Context()).Name()+" "+string(b))
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		name, body string
		status     int
		code, want string // problem code, or the lock name and the body read by the handler
	}{
		{"valid", `{"order_id": 42, "customer": {"id": "c:1"}}`, 200, "",
			`order:42:c%3A1 {"order_id": 42, "customer": {"id": "c:1"}}`},
		{"number as a float", `{"order_id": 4.2e1, "customer": {"id": "x"}}`, 200, "",
			`order:42:x {"order_id": 4.2e1, "customer": {"id": "x"}}`},
		{"malformed", `{"order_id": 42,`, 400, synchronized.CodeBody, ""},
		{"not an object", `[42]`, 400, synchronized.CodeBody, ""},
		{"trailing data", `{"order_id": 42, "customer": {"id": "x"}} {}`, 400, synchronized.CodeBody, ""},
		{"empty", ``, 400, synchronized.CodeBody, ""},
		{"oversized", `{"order_id": 42, "customer": {"id": "` + strings.Repeat("x", 64) + `"}}`, 413, synchronized.CodeBodyTooLarge, ""},
		{"missing field", `{"order_id": 42}`, 400, synchronized.CodeLockName, ""},
		{"null field", `{"order_id": null, "customer": {"id": "x"}}`, 400, synchronized.CodeLockName, ""},
		{"object field", `{"order_id": {}, "customer": {"id": "x"}}`, 400, synchronized.CodeLockName, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunked := range []bool{false, true} {
				var body io.Reader = strings.NewReader(tc.body)
				if chunked { // no Content-Length: the limit is found reading
					body = io.MultiReader(body)
				}
				resp, err := srv.Client().Post(srv.URL+"/pay", "application/json", body)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("chunked=%v: %d %s, want %d", chunked, resp.StatusCode, b, tc.status)
				}
				if tc.code != "" {
					if p := problemOf(t, resp, b); p.Code != tc.code {
						t.Fatalf("chunked=%v: code %s, want %s", chunked, p.Code, tc.code)
					}
				} else if string(b) != tc.want {
					t.Fatalf("chunked=%v: %q, want %q", chunked, b, tc.want)
				}
			}
		})
	}
}
