package postgres

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// hiddenURL is how Options show a URL they cannot redact.
const hiddenURL = "(not shown)"

// formats renders v in every way an application may print or log it.
func formats(v any) map[string]string {
	out := map[string]string{
		"%v":     fmt.Sprintf("%v", v),
		"%+v":    fmt.Sprintf("%+v", v),
		"%#v":    fmt.Sprintf("%#v", v),
		"%s":     fmt.Sprintf("%s", v),
		"Sprint": fmt.Sprint(v),
		"in a struct %+v": fmt.Sprintf("%+v", struct {
			Opts any
		}{v}),
	}
	if j, err := json.Marshal(v); err != nil {
		out["json"] = "json.Marshal: " + err.Error()
	} else {
		out["json"] = string(j)
	}
	for name, field := range map[string]zap.Field{"zap.Any": zap.Any("opts", v), "zap.Reflect": zap.Reflect("opts", v)} {
		var buf bytes.Buffer
		core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zap.DebugLevel)
		zap.New(core).Info("options", field)
		out[name] = buf.String()
	}
	return out
}

// TestOptionsFormatsRedact: Options print, marshal and log with the
// password shown as xxxxx, and the URL with its passwords replaced by xxxxx,
// or as "(not shown)" when the driver would refuse it (it cannot tell where
// the password ends) or it is a key=value DSN.
func TestOptionsFormatsRedact(t *testing.T) {
	const fieldPW = "Pa55W0rd"
	cases := []struct {
		name    string
		url     string
		wantURL string // as shown
	}{
		{"url", "postgres://app:" + secretPW + "@db:5432/app?sslmode=require", "postgres://app:xxxxx@db:5432/app?sslmode=require"},
		{"url query passwords", "POSTGRES://app@db/app?password=" + secretPW + "&sslpassword=S3cr&x=1&pass%77ord=3tPW",
			// x=1 after a password may be its rest after an unencoded &
			"postgres://app@db/app?password=xxxxx&sslpassword=xxxxx&xxxxx=xxxxx&pass%77ord=xxxxx"},
		{"url without password", "postgresql://app@db/app", "postgresql://app@db/app"},
		{"url empty password", "postgres://app:@db/app", "postgres://app:@db/app"},
		{"unescaped @", "postgres://app:" + atPW + "@db/app", hiddenURL},
		{"/ in password", "postgres://app:1/" + atPW + "@db/app", hiddenURL},
		{"@ in query, no /", "postgres://db?password=" + atPW, hiddenURL},
		{"@ in query after a /", "postgres://?host=/tmp&password=" + atPW, "postgres://?host=/tmp&password=xxxxx"},
		{"@ in query after user info", "postgres://app:" + secretPW + "@db?application_name=a@b", hiddenURL},
		{"%40 in query after user info", "postgres://app:" + secretPW + "@db?application_name=a%40b", "postgres://app:xxxxx@db?application_name=a%40b"},
		{"bad escape in query", "postgres://app@db/app?pass%7word=" + secretPW, hiddenURL},
		{"bad scheme", "postgress://app:" + secretPW + "@db/app", hiddenURL},
		{"key=value", "host=db password=" + secretPW, hiddenURL},
		{"mistyped scheme", "postgres:/app:" + secretPW + "@db/app", hiddenURL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{URL: tc.url, Password: fieldPW, Host: "db", Mode: ModeTable, ConnectTimeout: time.Second, TLS: &tls.Config{ServerName: "db"}}
			for _, v := range []any{o, &o} {
				for format, s := range formats(v) {
					for _, p := range append([]string{fieldPW}, secretPieces...) {
						if strings.Contains(s, p) {
							t.Fatalf("%T %s shows %q, a piece of a password: %s", v, format, p, s)
						}
					}
					if !strings.Contains(s, "xxxxx") || !strings.Contains(s, "table") {
						t.Fatalf("%T %s = %s; want the password shown as xxxxx, and the mode", v, format, s)
					}
					want := tc.wantURL
					if format == "json" || format == "zap.Reflect" {
						j, _ := json.Marshal(want)
						want = strings.Trim(string(j), `"`)
					}
					if !strings.Contains(s, want) {
						t.Fatalf("%T %s = %s; want the URL shown as %s", v, format, s, tc.wantURL)
					}
				}
			}
			m := jsonMap(t, o)
			if m["password"] != "xxxxx" || m["host"] != "db" || m["mode"] != ModeTable || m["tls"] != true ||
				m["connectTimeout"] != "1s" || m["url"] != tc.wantURL {
				t.Fatalf("json = %v; want password xxxxx, host, mode, tls, connectTimeout and url %q", m, tc.wantURL)
			}
		})
	}
	// nothing set: nothing shown as set
	var zero Options
	if s := fmt.Sprint(zero); strings.Contains(s, "xxxxx") {
		t.Fatalf("zero Options = %s; shows a password set", s)
	}
	if j, err := json.Marshal(zero); err != nil || string(j) != "{}" {
		t.Fatalf("json of zero Options = %s, %v; want {}", j, err)
	}
	if s := fmt.Sprintf("%#v", zero); !strings.HasPrefix(s, "postgres.Options{") {
		t.Fatalf("%%#v = %s; want postgres.Options{…}", s)
	}
}

// TestOptionsJSONCoversFields: every field of Options, set, appears in its
// JSON form under its configuration key (TLS as "tls"), so that a field
// added later is not silently left out (nor shown unredacted elsewhere).
func TestOptionsJSONCoversFields(t *testing.T) {
	var o Options
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("postgres://u:p@h/db")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int32, reflect.Int64:
			f.SetInt(7)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", v.Type().Field(i).Name, f.Kind())
		}
	}
	m := jsonMap(t, o)
	for i := range v.NumField() {
		key := v.Type().Field(i).Tag.Get("koanf")
		if key == "-" {
			key = strings.ToLower(v.Type().Field(i).Name)
		}
		if _, ok := m[key]; !ok {
			t.Errorf("json %v has no %q (field %s)", m, key, v.Type().Field(i).Name)
		}
	}
	if len(m) != v.NumField() || m["password"] != "xxxxx" {
		t.Fatalf("json = %v; want %d keys, password xxxxx", m, v.NumField())
	}
}

// TestOptionsFormatVerbs: every verb that applies to a struct goes through
// Format, which prints String (GoString for %#v) with the verb's flags, so
// no verb prints the URL or the password raw. Before, %d, %t, %e and %U
// printed the fields one by one ({%!d(string=postgres://u:S3cr3tPW@...)}):
// fmt uses String only for %v, %s, %q, %x and %X. The options are checked
// as a value, a pointer, an exported field, a slice element and a map
// value. (%p and a %w that is no error never reach Format: see
// docs/postgres.md.)
func TestOptionsFormatVerbs(t *testing.T) {
	const fieldPW = "Pa55W0rd"
	o := Options{URL: "postgres://app:" + secretPW + "@db/app", Password: fieldPW, Mode: ModeTable}
	type wrapper struct{ Opts Options }
	values := map[string]any{
		"value": o, "pointer": &o, "field": wrapper{o}, "field of pointer": &wrapper{o},
		"slice": []Options{o}, "map": map[string]Options{"a": o},
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%d", "%x", "%X", "% x", "%t", "%e", "%20v", "%-8s", "%U"} {
		for name, v := range values {
			s := fmt.Sprintf(verb, v)
			// the hex verbs encode what String gives: look for it encoded
			hexed := strings.ToLower(strings.ReplaceAll(s, " ", ""))
			for _, p := range []string{fieldPW, secretPW, "S3cr", "3tPW"} {
				if strings.Contains(s, p) || strings.Contains(hexed, hex.EncodeToString([]byte(p))) {
					t.Errorf("%s of %s shows %q: %s", verb, name, p, s)
				}
			}
			const want = "app:xxxxx@db/app"
			if !strings.Contains(s, want) && !strings.Contains(hexed, hex.EncodeToString([]byte(want))) {
				t.Errorf("%s of %s = %s; want the redacted options", verb, name, s)
			}
		}
	}
	if got, want := fmt.Sprintf("%v", o), o.String(); got != want {
		t.Errorf("%%v = %s; want String() %s", got, want)
	}
	if got, want := fmt.Sprintf("%#v", o), o.GoString(); got != want {
		t.Errorf("%%#v = %s; want GoString() %s", got, want)
	}
	if got, want := fmt.Sprintf("%q", o), strconv.Quote(o.String()); got != want {
		t.Errorf("%%q = %s; want %s", got, want)
	}
}

// TestOptionsFormatLimits pins what docs/postgres.md says Format cannot
// cover, so that the docs stay true: fmt never calls it for %p, nor for a
// %w whose operand is not an error, and prints the fields raw then (%p of a
// pointer prints only the address); it cannot call it through an
// unexported field, whose fields it prints raw with every verb, while
// encoding/json skips such a field. %T prints the type only.
func TestOptionsFormatLimits(t *testing.T) {
	o := Options{URL: "postgres://u:" + secretPW + "@h/db"}
	type hidden struct {
		Name string
		o    Options
	}
	verbW := "%w" // not a constant: go vet flags %w of a non-error, which is the point here
	raw := map[string]string{
		"%p of the value":      fmt.Sprintf("%p", o),
		"%w of the value":      fmt.Errorf(verbW, o).Error(),
		"%w of a pointer":      fmt.Errorf(verbW, &o).Error(),
		"unexported field":     fmt.Sprintf("%v", hidden{"x", o}),
		"unexported field %+v": fmt.Sprintf("%+v", hidden{"x", o}),
	}
	for how, s := range raw {
		if !strings.Contains(s, secretPW) {
			t.Errorf("%s = %s: redacted; update docs/postgres.md and the Format docs, which say it prints raw", how, s)
		}
	}
	if s := fmt.Sprintf("%p", &o); !strings.HasPrefix(s, "0x") || strings.Contains(s, secretPW) {
		t.Errorf("%%p of a pointer = %s; want the address only", s)
	}
	if s := fmt.Sprintf("%T", o); s != "postgres.Options" {
		t.Errorf("%%T = %s; want postgres.Options", s)
	}
	if j, err := json.Marshal(hidden{"x", o}); err != nil || string(j) != `{"Name":"x"}` {
		t.Errorf("json of an unexported field = %s, %v; want {\"Name\":\"x\"}", j, err)
	}
}

// jsonMap is v marshalled to JSON and read back as a map.
func jsonMap(t *testing.T, v any) map[string]any {
	t.Helper()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
