package synchronized_test

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"testing"

	"github.com/mutexfx/mutexfx/synchronized"
)

// TestNumberNames: a number names the same lock whatever its Go type, and
// never in exponent form: JSON decoded into an any holds 1234567 as a
// float64, which must give the name an int64 field or a path value gives.
func TestNumberNames(t *testing.T) {
	m, _ := newMutex(t)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"int64", int64(1234567), "n:1234567"},
		{"float64 integral", float64(1234567), "n:1234567"},
		{"float64 negative", -3.0, "n:-3"},
		{"float64 negative zero", math.Copysign(0, -1), "n:0"},
		{"float64 2^53", float64(1 << 53), "n:9007199254740992"},
		{"float64 past 2^53", float64(1 << 60), "n:1152921504606847000"}, // shortest, as JSON encoders write it
		{"float64 1e21", 1e21, "n:1000000000000000000000"},
		{"float64 fraction", 0.5, "n:0.5"},
		{"float64 small", 1e-7, "n:0.0000001"},
		{"float32 integral", float32(1234567), "n:1234567"},
		{"float32 fraction", float32(0.1), "n:0.1"},
		{"uint64 past int64", uint64(12345678901234567890), "n:12345678901234567890"},
		{"json.Number integer", json.Number("1234567"), "n:1234567"},
		{"json.Number exponent", json.Number("1.234567e6"), "n:1234567"},
		{"json.Number fraction", json.Number("0.5"), "n:0.5"},
		{"json.Number negative", json.Number("-3"), "n:-3"},
		{"json.Number past int64", json.Number("12345678901234567890"), "n:12345678901234567890"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lockName(t, m, "n:{v}", map[string]any{"v": tt.v})
			if err != nil || got != tt.want {
				t.Fatalf("%q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("typed fields", func(t *testing.T) {
		n := json.Number("1e6")
		in := struct {
			F float64
			G float32
			N json.Number
			P *json.Number
		}{F: 1e6, G: 1e6, N: n, P: &n}
		got, err := lockName(t, m, "{F}/{G}/{N}/{P}", in)
		if want := "1000000/1000000/1000000/1000000"; err != nil || got != want {
			t.Fatalf("%q, %v; want %q", got, err, want)
		}
	})
}

// TestNumberNamesFromJSON: one message decoded three ways (into a struct,
// into map[string]any, with UseNumber) names one lock.
func TestNumberNamesFromJSON(t *testing.T) {
	m, _ := newMutex(t)
	const msg = `{"id": 1234567}`
	var typed struct {
		ID int64 `json:"id"`
	}
	var untyped, numbers map[string]any
	if err := json.Unmarshal([]byte(msg), &typed); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(msg), &untyped); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(msg)))
	dec.UseNumber()
	if err := dec.Decode(&numbers); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]any{"struct": typed, "map": untyped, "UseNumber": numbers} {
		got, err := lockName(t, m, "order:{id}", in)
		if err != nil || got != "order:1234567" {
			t.Errorf("%s: %q, %v; want order:1234567", name, got, err)
		}
	}
}

// nilStringer panics when its String is called on a nil pointer.
type nilStringer struct{ s string }

func (n *nilStringer) String() string { return n.s }

// TestWrapNilValues: a nil interface, a nil pointer, or an interface
// holding a nil pointer is a missing value: ErrLockName, no panic.
func TestWrapNilValues(t *testing.T) {
	m, _ := newMutex(t)
	type input struct {
		S  fmt.Stringer
		T  encoding.TextMarshaler
		A  *netip.Addr
		AA any
	}
	tests := []struct {
		name string
		tmpl string
		in   input
	}{
		{"nil Stringer interface", "s:{S}", input{}},
		{"nil TextMarshaler interface", "t:{T}", input{}},
		{"nil pointer TextMarshaler", "a:{A}", input{}},
		{"Stringer holding a nil pointer", "s:{S}", input{S: (*nilStringer)(nil)}},
		{"TextMarshaler holding a nil pointer", "t:{T}", input{T: (*netip.Addr)(nil)}},
		{"any holding a nil pointer", "a:{AA}", input{AA: (*nilStringer)(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := lockName(t, m, tt.tmpl, tt.in); !errors.Is(err, synchronized.ErrLockName) {
				t.Fatalf("err = %v, want ErrLockName", err)
			}
		})
	}
	addr := netip.MustParseAddr("10.0.0.1")
	got, err := lockName(t, m, "{S}/{T}/{A}", input{S: &nilStringer{"x"}, T: addr, A: &addr})
	if err != nil || got != "x/10.0.0.1/10.0.0.1" {
		t.Fatalf("set values: %q, %v", got, err)
	}
}
