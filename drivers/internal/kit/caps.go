package kit

import "github.com/mutexfx/mutexfx/drivers"

// Capable is a driver with every optional capability but hand-over:
// `var _ kit.Capable = (*Driver)(nil)` checks them all at compile time.
type Capable interface {
	drivers.Driver
	drivers.Renewer
	drivers.Inspector
	drivers.Describer
	drivers.Subscriber
}
