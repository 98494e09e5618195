//go:build linux

package file_test

import (
	"slices"
	"testing"
	"time"
)

func TestListByPrefix(t *testing.T) {
	d := newDriver(t, t.TempDir())
	for _, k := range []string{"app:job-1", "app:job_2", "app:a:b", "other:job", "app:released"} {
		if !acquire(t, d, k, "tok-"+k, time.Minute).Acquired {
			t.Fatalf("%s not acquired", k)
		}
	}
	if ok, err := d.Release(ctxT(t), "app:released", "tok-app:released"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	ls, err := d.List(ctxT(t), "app:")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Key)
		if l.Token != "tok-"+l.Key || l.Fence == 0 || l.TTL <= 0 {
			t.Errorf("%s: %+v", l.Key, l.LockInfo)
		}
	}
	slices.Sort(got)
	// "app:a:b" is not listed: its file name does not give its key back.
	if want := []string{"app:job-1", "app:job_2"}; !slices.Equal(got, want) {
		t.Fatalf("listed %q, want %q", got, want)
	}
}
