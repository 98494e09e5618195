package synchronized

import (
	"context"
	"fmt"
	"reflect"

	"github.com/mutexfx/mutexfx/component"
)

// Action is the shape of the work Wrap protects: a queue consumer, an RPC
// method, a command handler.
type Action[In, Out any] func(ctx context.Context, in In) (Out, error)

// Wrap returns fn running holding the lock named by tmpl over In's fields:
// "order:{id}" reads the field with Go name "id", or the field
// encoding/json fills from the key "id" (its rules: the shallowest field
// wins, then the only tagged one at that depth); dotted paths
// ("{customer.id}") go into nested structs, pointers and maps with string
// keys (map[string]any included). The fields are resolved against In once,
// here: a malformed tmpl, a field In does not have, an ambiguous one (two
// json keys at the same depth, or the Go name of one field and the json key
// of another), or a field whose type cannot name a lock (a struct, slice or
// map) fail here with an error wrapping ErrTemplate. Fields inside
// interface values (any) are looked up at each call.
//
// Numbers are written in decimal without an exponent, whatever their type:
// 1234567 decoded from JSON into an any (a float64), a json.Number, an
// int64 field and the path value "1234567" all give "order:1234567".
// Values are escaped as Template describes.
//
// Per call: a field that is missing (nil pointer, nil interface, absent
// key) or empty, or values making a name longer than the store takes
// (component.ErrNameTooLong), fail with ErrLockName; a lock not acquired
// in time with component.ErrTimeout; a store failure with
// component.ErrDriver; ctx ending during the wait with ctx's cause. fn's ctx carries the lock
// (LockFrom) and ends when the lock is lost; the lock is released when fn
// returns or panics.
func Wrap[In, Out any](tmpl string, opts Options, fn Action[In, Out]) (Action[In, Out], error) {
	t, err := ParseTemplate(tmpl)
	if err != nil {
		return nil, err
	}
	typ := reflect.TypeFor[In]()
	getters := map[string]getter{}
	for _, f := range t.Fields() {
		if getters[f], err = compileField(typ, f); err != nil {
			return nil, err
		}
	}
	return WrapFunc(func(in In) (string, error) {
		v := reflect.ValueOf(&in).Elem()
		return t.Execute(func(field string) (string, bool) { return getters[field](v) })
	}, opts, fn)
}

// WrapFunc is Wrap with the lock name computed by name. An error from name,
// an empty name or one longer than the store takes fails the call with an
// error wrapping ErrLockName.
func WrapFunc[In, Out any](name func(in In) (string, error), opts Options, fn Action[In, Out]) (Action[In, Out], error) {
	if name == nil || fn == nil {
		return nil, fmt.Errorf("%w: nil name function or action", ErrTemplate)
	}
	l, err := opts.locker()
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, in In) (out Out, err error) {
		n, err := name(in)
		if err == nil && n == "" {
			err = component.ErrEmptyName
		}
		if err != nil {
			return out, fmt.Errorf("%w: %w", ErrLockName, err)
		}
		lock, err := l.acquire(ctx, n)
		if err != nil {
			return out, err
		}
		err = component.Run(ctx, lock, func(lctx context.Context, _ *component.Lock) error {
			var ferr error
			out, ferr = fn(lctx, in)
			return ferr
		})
		return out, err
	}, nil
}
