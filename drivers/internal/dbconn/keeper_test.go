package dbconn

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestKeeperKeeps: Put keeps up to n connections, Get hands back the most
// recent one (cached) and then goes to the pool; Close returns the kept
// ones, and Put after it returns connections to the pool.
func TestKeeperKeeps(t *testing.T) {
	ctx, db, socks := openPool(t, mysqlPolicy)
	k := NewKeeper(db, socks, 2, time.Minute)
	var ps [3]Pinned[state]
	for i := range ps {
		p, cached, err := k.Get(ctx)
		if err != nil || cached || p.Sock == nil {
			t.Fatalf("Get %d = cached %v, socket %v, %v; want a pool connection with its socket", i, cached, p.Sock, err)
		}
		ps[i] = p
	}
	for _, p := range ps {
		k.Put(p)
	}
	if n := db.Stats().InUse; n != 2 {
		t.Fatalf("%d connections in use with 3 put; want the 2 kept", n)
	}
	p, cached, err := k.Get(ctx)
	if err != nil || !cached || p.Sock != ps[1].Sock {
		t.Fatalf("Get = cached %v, the last kept %v, %v; want it", cached, p.Sock == ps[1].Sock, err)
	}
	k.Put(p)
	k.Close()
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections in use after Close; want 0", n)
	}
	if p, _, err = k.Get(ctx); err != nil {
		t.Fatal(err)
	}
	k.Put(p)
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections in use after a Put once closed; want 0", n)
	}
}

// TestKeeperExpires: a kept connection goes back to the pool once kept
// for the keeper's time, with no Get to come.
func TestKeeperExpires(t *testing.T) {
	ctx, db, socks := openPool(t, mysqlPolicy)
	k := NewKeeper(db, socks, 2, 50*time.Millisecond)
	defer k.Close()
	p, _, err := k.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k.Put(p)
	testutil.Poll(t, 10*time.Second, "the kept connection back in the pool", func() bool { return db.Stats().InUse == 0 })
	p, cached, err := k.Get(ctx)
	if err != nil || cached {
		t.Fatalf("Get after the expiry = cached %v, %v; want a pool connection", cached, err)
	}
	p.Conn.Close()
}
