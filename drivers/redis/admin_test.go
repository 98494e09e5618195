package redis

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

func TestListByPrefix(t *testing.T) {
	d := standalone(t, Options{})
	ctx := t.Context()
	prefix := "redislist:" + strconv.FormatInt(time.Now().UnixNano(), 10) + ":"
	// Names that the key encoding and the SCAN pattern must both survive.
	names := []string{"plain", "a{b}c", "100%", "star*?[x]", `back\slash`}
	for i, n := range names {
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: prefix + n, Token: "t" + strconv.Itoa(i), TTL: time.Minute})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire %q = %+v, %v", n, res, err)
		}
	}
	other := prefix[:len(prefix)-1] + "x:"
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: other + "z", Token: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Release(ctx, prefix+"plain", "t0"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	ls, err := d.List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Key[len(prefix):])
		i := slices.Index(names, l.Key[len(prefix):])
		if l.Token != "t"+strconv.Itoa(i) || l.Fence == 0 || l.TTL <= 0 {
			t.Errorf("%q: %+v", l.Key, l.LockInfo)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names[1:]))
	if !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
}

func TestLockKeyName(t *testing.T) {
	for _, k := range []string{"", "a", "a{b}c", "%", "%7B"} {
		got, ok := lockKeyName(lockKey(k))
		if !ok || got != k {
			t.Errorf("lockKeyName(lockKey(%q)) = %q, %v", k, got, ok)
		}
		if _, ok := lockKeyName(fenceKey(k)); ok {
			t.Errorf("fence key of %q taken for a lock key", k)
		}
	}
}
