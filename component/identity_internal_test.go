package component

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestStatusFromStoreHolder: a lock whose token the store does not keep
// is shown with the holder the store tells (drivers.LockInfo.Holder),
// without an acquisition time; anything else is an unknown holder.
func TestStatusFromStoreHolder(t *testing.T) {
	for _, tc := range []struct {
		holder string
		want   Holder
		known  bool
	}{
		{"~orders~db-1.example~4242", Holder{Application: "orders", Host: "db-1.example", PID: 4242}, true},
		{"", Holder{}, false},
		{"psql", Holder{}, false},
		{"orders~db-1~4242", Holder{}, false},
		{"~orders~db-1~x", Holder{}, false},
		{"~orders~db-1~4242~extra", Holder{}, false},
	} {
		st := status("n", drivers.LockInfo{Holder: tc.holder})
		if st.HolderKnown != tc.known || st.Holder != tc.want || st.token != "" {
			t.Errorf("Holder %q: status %+v; want %+v (known %v)", tc.holder, st, tc.want, tc.known)
		}
	}
	// a token the store keeps wins
	st := status("n", drivers.LockInfo{Token: "plain", Holder: "~orders~db-1~1"})
	if st.HolderKnown {
		t.Errorf("a foreign token with a store holder: %+v; want unknown", st)
	}
}
