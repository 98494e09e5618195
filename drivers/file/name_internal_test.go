//go:build linux

package file

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// oddKeys are keys that must map to safe, distinct file names.
var oddKeys = []struct{ name, key string }{
	{"parent", "../x"},
	{"parent-deep", "../../../../etc/passwd"},
	{"slash", "/"},
	{"slashes", "a/b/c"},
	{"absolute", "/tmp/x"},
	{"nul", "\x00"},
	{"nul-inside", "a\x00b"},
	{"empty", ""},
	{"dot", "."},
	{"dotdot", ".."},
	{"hidden", ".lock"},
	{"dash", "-rf"},
	{"long-10KB", strings.Repeat("x", 10<<10)},
	{"long-10KB-other", strings.Repeat("x", 10<<10-1) + "y"},
	{"unicode", "ключ-🔒-鍵"},
	{"unicode-nfd", "e\u0301"},
	{"unicode-nfc", "\u00e9"},
	{"case-lower", "orders:42"},
	{"case-upper", "ORDERS:42"},
	{"case-mixed", "Orders:42"},
	{"backslash", `a\b`},
	{"quote", `it's "x"`},
	{"percent", "100%"},
	{"newline", "a\nb"},
	{"same-stem-1", "a/b"},
	{"same-stem-2", "a?b"},
}

func TestFileName(t *testing.T) {
	seen := map[string]string{}
	folded := map[string]string{}
	for _, tc := range oddKeys {
		t.Run(tc.name, func(t *testing.T) {
			n := fileName(tc.key)
			switch {
			case strings.ContainsAny(n, "/\x00\\"):
				t.Errorf("fileName(%q) = %q contains a separator or NUL", tc.key, n)
			case strings.HasPrefix(n, ".") || strings.HasPrefix(n, "-"):
				t.Errorf("fileName(%q) = %q starts with %q", tc.key, n, n[:1])
			case !filepath.IsLocal(n) || filepath.Base(n) != n:
				t.Errorf("fileName(%q) = %q is not a local base name", tc.key, n)
			case len(n) > 130:
				t.Errorf("fileName(%q) is %d bytes long", tc.key, len(n))
			case !strings.HasSuffix(n, ".lock"):
				t.Errorf("fileName(%q) = %q lacks .lock", tc.key, n)
			}
			for i := 0; i < len(n); i++ {
				if c := n[i]; c < 0x20 || c >= 0x7f {
					t.Errorf("fileName(%q) = %q has byte %#x", tc.key, n, c)
				}
			}
			if fileName(tc.key) != n {
				t.Errorf("fileName(%q) is not deterministic", tc.key)
			}
			if other, ok := seen[n]; ok {
				t.Errorf("keys %q and %q share the file %q", other, tc.key, n)
			}
			seen[n] = tc.key
			// Distinct even on a case-insensitive file system.
			if other, ok := folded[strings.ToLower(n)]; ok {
				t.Errorf("keys %q and %q differ only in the case of their file name", other, tc.key)
			}
			folded[strings.ToLower(n)] = tc.key
		})
	}
}

func TestRecordCodec(t *testing.T) {
	buf := make([]byte, recMax)
	valid := func(token string) []byte {
		return append([]byte(nil), encode(buf, &record{fence: 7, expiry: 123, liveOff: 8, pid: 42}, token)...)
	}
	corrupt := func(b []byte, i int) []byte { b[i] ^= 0xff; return b }
	tests := []struct {
		name    string
		in      []byte
		wantErr bool
		want    record
		token   string
	}{
		{name: "empty file is free with fence 0", in: nil},
		{name: "held", in: valid("tok"), want: record{fence: 7, expiry: 123, liveOff: 8, pid: 42}, token: "tok"},
		{name: "free keeps fence", in: valid(""), want: record{fence: 7, expiry: 123, liveOff: 8, pid: 42}},
		{name: "longer leftovers ignored", in: append(valid("tok"), "garbage"...), want: record{fence: 7, expiry: 123, liveOff: 8, pid: 42}, token: "tok"},
		{name: "short", in: []byte("MXFL"), wantErr: true},
		{name: "bad magic", in: corrupt(valid("tok"), 0), wantErr: true},
		{name: "bad version", in: corrupt(valid("tok"), 4), wantErr: true},
		{name: "fence flipped", in: corrupt(valid("tok"), 9), wantErr: true},
		{name: "token flipped", in: corrupt(valid("tok"), recHeader+1), wantErr: true},
		{name: "token cut", in: valid("tok")[:recHeader+2], wantErr: true},
		{name: "token too long", in: func() []byte { b := valid("tok"); b[6], b[7] = 0xff, 0xff; return b }(), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r record
			err := decode(tc.in, &r)
			if tc.wantErr {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("decode: err %v, want ErrCorrupt", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if string(r.token) != tc.token {
				t.Errorf("token %q, want %q", r.token, tc.token)
			}
			if r.fence != tc.want.fence || r.expiry != tc.want.expiry || r.liveOff != tc.want.liveOff || r.pid != tc.want.pid {
				t.Errorf("record %+v, want %+v", r, tc.want)
			}
		})
	}
}
