package synchronized_test

import (
	"encoding/json"
	"errors"
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

// TestJSONMiddlewareLocksWhatTheHandlerReads: encoding/json fills a
// handler's struct from keys matched ignoring case, the last one winning,
// so a body with a lock name key twice or spelt in another case is
// refused (400, E_MUTEX_BODY); any body let through runs the handler under
// the lock of the values it decodes, into a struct or a map. The lock was
// named from the exact key: {"order_id": 1, "ORDER_ID": 2} locked
// "order:1" while the handler worked on order 2.
func TestJSONMiddlewareLocksWhatTheHandlerReads(t *testing.T) {
	t.Parallel()
	m, _ := newMutex(t)
	mw, err := synchronized.JSONMiddleware("order:{order_id}:{customer.id}", synchronized.Options{Mutex: m})
	if err != nil {
		t.Fatal(err)
	}
	type input struct {
		OrderID  json.Number `json:"order_id"`
		Customer struct {
			ID string `json:"id"`
		} `json:"customer"`
	}
	var ran bool
	var locked string
	var in input
	var asMap struct {
		OrderID  json.Number       `json:"order_id"`
		Customer map[string]string `json:"customer"`
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran, locked = true, synchronized.LockFrom(r.Context()).Name()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		var obj map[string]json.RawMessage
		if err := errors.Join(json.Unmarshal(b, &in), json.Unmarshal(b, &obj),
			json.Unmarshal(obj["order_id"], &asMap.OrderID), json.Unmarshal(obj["customer"], &asMap.Customer)); err != nil {
			t.Error(err)
		}
	}))
	for _, tc := range []struct {
		name, body string
		refused    bool
	}{
		{"one spelling", `{"order_id": 1, "customer": {"id": "a"}}`, false},
		{"keys off the path", `{"order_id": 1, "customer": {"id": "a"}, "ORDER": 3, "order_ids": 4, "other": {"ID": 1, "id": 2}}`, false},
		{"upper case last", `{"order_id": 1, "ORDER_ID": 2, "customer": {"id": "a"}}`, true},
		{"upper case first", `{"ORDER_ID": 2, "order_id": 1, "customer": {"id": "a"}}`, true},
		{"upper case alone", `{"Order_Id": 2, "customer": {"id": "a"}}`, true},
		{"exact duplicate", `{"order_id": 1, "order_id": 2, "customer": {"id": "a"}}`, true},
		{"duplicate written with an escape", `{"order_id": 1, "order_\u0069d": 2, "customer": {"id": "a"}}`, true},
		{"nested key in two cases", `{"order_id": 1, "customer": {"id": "a", "ID": "b"}}`, true},
		{"parent key in two cases", `{"order_id": 1, "customer": {"id": "a"}, "Customer": {"id": "b"}}`, true},
		{"parent key repeated without the field", `{"order_id": 1, "customer": {"id": "a"}, "customer": {}}`, true},
		{"Unicode case folding (long s)", `{"order_id": 1, "customer": {"id": "a"}, "cuſtomer": {"id": "b"}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran, locked, in, asMap.Customer = false, "", input{}, nil
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader(tc.body)))
			if ran {
				byStruct := "order:" + in.OrderID.String() + ":" + in.Customer.ID
				byMap := "order:" + asMap.OrderID.String() + ":" + asMap.Customer["id"]
				if locked != byStruct || locked != byMap {
					t.Fatalf("lock %q; the handler reads %q from a struct, %q from a map", locked, byStruct, byMap)
				}
			}
			if tc.refused && (ran || rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), synchronized.CodeBody)) {
				t.Fatalf("handler ran: %v, %d %s; want it refused with 400 %s", ran, rec.Code, rec.Body, synchronized.CodeBody)
			}
			if !tc.refused && (!ran || rec.Code != http.StatusOK) {
				t.Fatalf("handler ran: %v, %d %s", ran, rec.Code, rec.Body)
			}
		})
	}
	if p := synchronized.ProblemOf(synchronized.ErrAmbiguousKey); p.Status != http.StatusBadRequest || !strings.Contains(p.Detail, "letter case") {
		t.Errorf("ProblemOf(ErrAmbiguousKey) = %+v", p)
	}
}
