package synchronized_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/synchronized"
)

type Meta struct {
	Trace string `json:"id"`
}

type Ref1 struct{ Ref string }

type Ref2 struct {
	Other string `json:"Ref"`
}

type Ref3 struct{ Ref string }

type X1 struct {
	A string `json:"x"`
}

type X2 struct {
	B string `json:"x"`
}

type Z1 struct{ Z string }

type Z2 struct{ Z string }

// shallow: encoding/json fills OrderID from "id", not the deeper Trace.
type shallow struct {
	Meta
	OrderID string `json:"id"`
}

// taggedWins: three "Ref" keys at depth 1, one tagged: json fills Other.
type taggedWins struct {
	Ref1
	Ref2
	Ref3
}

// named: an embedded struct with a json name is a field, not promoted.
type named struct {
	Meta `json:"meta"`
}

// keyTie: two tagged "x" at depth 1: json ignores the key. (X2 embedded
// by pointer: go vet flags the tie otherwise.)
type keyTie struct {
	X1
	*X2
}

// nameTie: two untagged Z at depth 1.
type nameTie struct {
	Z1
	Z2
}

// crossed: "ID" is the Go name of one field and the json key of another.
type crossed struct {
	ID  string `json:"key"`
	Key string `json:"ID"`
}

// wrapped names the lock of one call of an action on In wrapped with tmpl.
func wrapped[In any](m *component.Mutex, tmpl string, in In) (string, error) {
	act, err := synchronized.Wrap(tmpl, synchronized.Options{Mutex: m}, func(ctx context.Context, _ In) (string, error) {
		return synchronized.LockFrom(ctx).Name(), nil
	})
	if err != nil {
		return "", err
	}
	return act(context.Background(), in)
}

// decoded decodes msg into a T, as a consumer would.
func decoded[T any](t *testing.T, msg string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(msg), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWrapJSONKeyResolution: a template field that is a json key names the
// field encoding/json fills from that key: the shallowest, the tagged one
// at equal depth; an ambiguous key fails at Wrap.
func TestWrapJSONKeyResolution(t *testing.T) {
	m, _ := newMutex(t)
	tests := []struct {
		name string
		lock func() (string, error)
		want string
		err  error
	}{
		{"shallowest key wins", func() (string, error) {
			return wrapped(m, "order:{id}", decoded[shallow](t, `{"id":"o1"}`))
		}, "order:o1", nil},
		{"shallowest key wins, deeper one set", func() (string, error) {
			return wrapped(m, "order:{id}", shallow{Meta: Meta{Trace: "t1"}, OrderID: "o1"})
		}, "order:o1", nil},
		{"tagged beats untagged at equal depth", func() (string, error) {
			return wrapped(m, "r:{Ref}", decoded[taggedWins](t, `{"Ref":"r1"}`))
		}, "r:r1", nil},
		{"named embedded struct not promoted", func() (string, error) {
			return wrapped(m, "t:{id}", named{Meta{Trace: "t1"}})
		}, "", synchronized.ErrTemplate},
		{"named embedded struct by path", func() (string, error) {
			return wrapped(m, "t:{meta.id}", decoded[named](t, `{"meta":{"id":"t1"}}`))
		}, "t:t1", nil},
		{"two tagged at equal depth", func() (string, error) {
			return wrapped(m, "x:{x}", keyTie{X1{"a"}, &X2{"b"}})
		}, "", synchronized.ErrTemplate},
		{"two untagged at equal depth", func() (string, error) {
			return wrapped(m, "z:{Z}", nameTie{Z1{"a"}, Z2{"b"}})
		}, "", synchronized.ErrTemplate},
		{"Go name of one field, json key of another", func() (string, error) {
			return wrapped(m, "c:{ID}", crossed{ID: "a", Key: "b"})
		}, "", synchronized.ErrTemplate},
		{"json key of the crossed field", func() (string, error) {
			return wrapped(m, "c:{key}", crossed{ID: "a", Key: "b"})
		}, "c:a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.lock()
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("%q, %v; want %v", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("%q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
