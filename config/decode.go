package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/mutexfx/mutexfx/component"
)

// Error is a configuration error at a key path, such as
// "mutex.orders.ttl: must be positive".
type Error struct {
	// Path is the full key path, dot separated.
	Path string
	// Msg says what is wrong.
	Msg string
}

// Error returns "path: msg".
func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// Errorf returns an *Error at path.
func Errorf(path, format string, args ...any) error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Join joins a key path and a key.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Forever is the Duration that waits without limit (timeout: -1, "infinite"
// or "forever" in configuration; no other negative number).
const Forever = component.Forever

// Decode decodes a configuration block (nested maps as koanf loads them) into
// out, a pointer to a struct whose fields carry `koanf:"key"` tags. Unknown
// keys are errors, and every error names the full key path under path.
// Durations (time.Duration fields) accept Go duration strings ("1m30s"),
// integers and numeric strings as milliseconds (koanf would otherwise read an
// integer as nanoseconds), and "infinite"/"forever" as [Forever].
func Decode(path string, in map[string]any, out any) error {
	var md mapstructure.Metadata
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook:       DurationHook,
		ErrorUnused:      false,
		Metadata:         &md,
		Result:           out,
		TagName:          "koanf",
		WeaklyTypedInput: true,
	})
	if err != nil {
		return err
	}
	if err := dec.Decode(foldKeys(in)); err != nil {
		return decodeError(path, err)
	}
	if len(md.Unused) > 0 {
		key := md.Unused[0]
		for _, k := range md.Unused {
			if k < key {
				key = k
			}
		}
		return unknownKey(Join(path, key), key, keysOf(reflect.TypeOf(out)))
	}
	return nil
}

// decodeError turns a mapstructure error into an *Error naming the key path.
func decodeError(path string, err error) error {
	var de *mapstructure.DecodeError
	if errors.As(err, &de) {
		return Errorf(Join(path, de.Name()), "%v", unwrapMsg(de.Unwrap()))
	}
	// mapstructure joins several errors; keep the first, which names its key.
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if name, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(name, " ") {
		name = strings.Trim(name, "'\"")
		return Errorf(Join(path, name), "%s", rest)
	}
	return Errorf(path, "%s", msg)
}

func unwrapMsg(err error) string {
	if err == nil {
		return "invalid value"
	}
	return err.Error()
}

// DurationHook is the mapstructure decode hook Decode uses for durations.
func DurationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	return ParseDuration(data)
}

// ParseDuration reads a configuration duration: a time.Duration as is, a Go
// duration string, an integer or numeric string as milliseconds, a float as
// milliseconds, -1 and "infinite"/"forever" as Forever. Another negative
// number of milliseconds is an error (a negative Go duration string is
// returned as is, for the key's own check).
func ParseDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case time.Duration:
		return x, nil
	case int:
		return ms(float64(x))
	case int8, int16, int32, int64:
		return ms(float64(reflect.ValueOf(x).Int()))
	case uint, uint8, uint16, uint32, uint64:
		return ms(float64(reflect.ValueOf(x).Uint()))
	case float32:
		return ms(float64(x))
	case float64:
		return ms(x)
	case string:
		s := strings.TrimSpace(x)
		switch strings.ToLower(s) {
		case "infinite", "infinity", "forever":
			return Forever, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return ms(f)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: use a Go duration (\"30s\") or milliseconds", x)
		}
		return d, nil
	default:
		return 0, fmt.Errorf("invalid duration of type %T", v)
	}
}

func ms(f float64) (time.Duration, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/int64(time.Millisecond)) {
		return 0, fmt.Errorf("duration %v ms out of range", f)
	}
	switch {
	case f == -1:
		return Forever, nil
	case f < 0:
		return 0, fmt.Errorf("negative duration %v ms: only -1 (or \"infinite\") means no limit", f)
	}
	return time.Duration(f * float64(time.Millisecond)), nil
}

// foldKeys returns in with one key per case-insensitive spelling, nested maps
// too: of two spellings (busyTimeout from a file, busytimeout from the
// environment) the lower-case one wins, as for a store block's keys. The
// decoder matches names case-insensitively and would report the other as
// unknown.
func foldKeys(in map[string]any) map[string]any {
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	slices.Sort(keys) // upper case sorts first: the lower-case spelling comes last and wins
	chosen := make(map[string]string, len(in))
	for _, k := range keys {
		chosen[strings.ToLower(k)] = k
	}
	out := make(map[string]any, len(chosen))
	for _, k := range chosen {
		v := in[k]
		if m, ok := v.(map[string]any); ok {
			v = foldKeys(m)
		}
		out[k] = v
	}
	return out
}
