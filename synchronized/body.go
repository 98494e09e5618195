package synchronized

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// DefaultMaxBodyBytes is Options.MaxBodyBytes's default: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// ErrBody reports a request body JSONMiddleware cannot read as one JSON
// object (malformed JSON, another value, trailing data, a failed read):
// 400, code E_MUTEX_BODY.
var ErrBody = errors.New("synchronized: the request body is not a JSON object")

// ErrBodyTooLarge reports a request body longer than Options.MaxBodyBytes:
// 413, code E_MUTEX_BODY_TOO_LARGE.
var ErrBodyTooLarge = errors.New("synchronized: the request body is too large")

// JSONMiddleware is Middleware with the fields of tmpl read from the
// request's body, a JSON object: "order:{order_id}" with the body
// {"order_id": 42, ...}; a dotted field goes into nested objects
// ("{customer.id}"). Values are strings, numbers (in decimal, as Wrap
// writes them) or booleans, escaped as Template describes.
//
// The body is read in full, up to Options.MaxBodyBytes (1 MiB by
// default), before the lock is taken, and given to the handler again
// from the start (r.Body, and r.GetBody for a retry). Per request, besides
// Middleware's answers:
//   - a body longer than the limit: 413 (E_MUTEX_BODY_TOO_LARGE);
//   - a body that is not one JSON object: 400 (E_MUTEX_BODY);
//   - a body with a key of a field twice, or spelt in another letter
//     case, in an object the field is read from: 400 (E_MUTEX_BODY),
//     see ErrAmbiguousKey. encoding/json matches keys to struct fields
//     ignoring case, the last one winning: without this the handler
//     could work on another value than the lock is named from;
//   - a field absent, null, empty, or an object or array: 400
//     (E_MUTEX_LOCK_NAME).
func JSONMiddleware(tmpl string, opts Options) (func(http.Handler) http.Handler, error) {
	t, err := ParseTemplate(tmpl)
	if err != nil {
		return nil, err
	}
	limit := opts.MaxBodyBytes
	if limit == 0 {
		limit = DefaultMaxBodyBytes
	}
	segs := map[string][]string{}
	for _, f := range t.Fields() {
		segs[f] = strings.Split(f, ".")
	}
	keys := newKeyTree(t.Fields())
	return MiddlewareFunc(func(r *http.Request) (string, error) {
		obj, body, err := readJSONObject(r, limit)
		if err != nil {
			return "", err
		}
		if err := checkKeys(body, keys, "the body"); err != nil {
			return "", err
		}
		v := reflect.ValueOf(obj)
		return t.Execute(func(field string) (string, bool) { return dynamic(v, segs[field]) })
	}, opts)
}

// readJSONObject reads r's body, at most limit bytes, puts it back for the
// handler and decodes it as one JSON object, numbers as json.Number. It
// returns the object and the body.
func readJSONObject(r *http.Request, limit int64) (map[string]any, []byte, error) {
	if r.ContentLength > limit {
		return nil, nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil, fmt.Errorf("%w: no body", ErrBody)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBody, err)
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBody, err)
	}
	if obj == nil {
		return nil, nil, fmt.Errorf("%w: null", ErrBody)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("%w: data after the object", ErrBody)
	}
	return obj, b, nil
}
