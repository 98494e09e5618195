package component

import (
	"encoding/json"
	"fmt"

	"github.com/mutexfx/mutexfx/internal/redact"
)

// A Mutex and a Lock print (every fmt verb that reaches Format: see
// redact.Format), marshal to JSON and log (zap.Any, zap.Reflect) as a short
// description that holds nothing of their driver but its type: a driver's
// fields may hold credentials, and fmt prints the fields of unexported
// struct fields raw, whatever their own Format says.

// mutexView is what a Mutex prints.
type mutexView struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	Driver string `json:"driver"` // the driver's type only
}

func (m *Mutex) view() mutexView {
	if m == nil || m.drv == nil {
		return mutexView{Driver: "none (Mutex used without New)"}
	}
	return mutexView{Name: m.opts.Name, Prefix: m.opts.Prefix, Driver: fmt.Sprintf("%T", m.drv)}
}

// String describes the Mutex: its name, prefix and driver type.
func (m *Mutex) String() string { return fmt.Sprintf("component.Mutex%+v", m.view()) }

// GoString is String in Go syntax, for %#v.
func (m *Mutex) GoString() string { return redact.GoString("component.Mutex", m.view()) }

// Format prints the Mutex as String does (GoString for %#v).
func (m *Mutex) Format(f fmt.State, verb rune) { redact.Format(f, verb, m.String, m.GoString) }

// MarshalJSON encodes the Mutex's name, prefix and driver type.
func (m *Mutex) MarshalJSON() ([]byte, error) { return json.Marshal(m.view()) }

// lockView is what a Lock prints: never its token.
type lockView struct {
	Name  string `json:"name"`
	Key   string `json:"key"`
	Fence uint64 `json:"fence"`
}

func (l *Lock) view() lockView {
	if l == nil {
		return lockView{}
	}
	return lockView{Name: l.name(), Key: l.key, Fence: l.fence}
}

// String describes the lock: its name, key and fence.
func (l *Lock) String() string { return fmt.Sprintf("component.Lock%+v", l.view()) }

// GoString is String in Go syntax, for %#v.
func (l *Lock) GoString() string { return redact.GoString("component.Lock", l.view()) }

// Format prints the lock as String does (GoString for %#v).
func (l *Lock) Format(f fmt.State, verb rune) { redact.Format(f, verb, l.String, l.GoString) }

// MarshalJSON encodes the lock's name, key and fence.
func (l *Lock) MarshalJSON() ([]byte, error) { return json.Marshal(l.view()) }
