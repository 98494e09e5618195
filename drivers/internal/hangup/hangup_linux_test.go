//go:build linux

package hangup

import (
	"net"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection, closed when the
// test ends.
func pair(t testing.TB) (local *net.TCPConn, peer *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	local, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	peer, err = ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close(); peer.Close() })
	return local, peer
}

// signal returns a function to arm and the channel it reports its calls on.
func signal() (func(), chan struct{}) {
	ch := make(chan struct{}, 2)
	return func() { ch <- struct{}{} }, ch
}

// armed is a connection armed on a Watcher: its local end, its peer, its
// registration, and the armed function's calls.
type armed struct {
	local, peer *net.TCPConn
	c           *Conn
	called      chan struct{}
}

// arm makes a connection and arms it on w (with ArmPeek when end is set).
func arm(t *testing.T, w *Watcher, end func(byte) bool) armed {
	t.Helper()
	a := armed{c: &Conn{}}
	a.local, a.peer = pair(t)
	a.c.Watch(w, a.local)
	fn, called := signal()
	a.called = called
	if end != nil {
		a.c.ArmPeek(fn, end)
	} else {
		a.c.Arm(fn)
	}
	return a
}

func waitCall(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not called within 5s", what)
	}
}

func noCall(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: called", what)
	default:
	}
}

// settle returns once w has handled the events of the sockets before
// now: it arms another connection, closes its peer and waits for the call
// (epoll reports readiness in order, and w calls in that order).
func settle(t *testing.T, w *Watcher) {
	t.Helper()
	a := arm(t, w, nil)
	a.peer.Close()
	waitCall(t, a.called, "another connection's close")
}

// TestHangup: the peer's close (FIN) and its reset (RST) call the function
// armed, once; bytes the peer sends do not (they are a reply to the
// connection's own statement).
func TestHangup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(peer *net.TCPConn)
	}{
		{"close", func(peer *net.TCPConn) { peer.Close() }},
		{"reset", func(peer *net.TCPConn) { peer.SetLinger(0); peer.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w Watcher
			defer w.Close()
			a := arm(t, &w, nil)
			if _, err := a.peer.Write([]byte("reply")); err != nil {
				t.Fatal(err)
			}
			settle(t, &w)
			noCall(t, a.called, "bytes from the peer")
			tc.fault(a.peer)
			waitCall(t, a.called, tc.name)
			noCall(t, a.called, tc.name+" (twice)")
		})
	}
}

// TestDisarm: a hang-up while disarmed calls nothing; arming again calls
// the new function at once.
func TestDisarm(t *testing.T) {
	var w Watcher
	defer w.Close()
	a := arm(t, &w, nil)
	a.c.Disarm()
	a.peer.Close()
	settle(t, &w) // the hang-up fired with nothing armed
	fn, called := signal()
	a.c.Arm(fn)
	waitCall(t, called, "arming after a hang-up")
	noCall(t, a.called, "a disarmed function")
}

// TestForget: a forgotten connection can be closed and its descriptor
// reused; only the new connection's function is called.
func TestForget(t *testing.T) {
	var w Watcher
	defer w.Close()
	a := arm(t, &w, nil)
	a.c.Forget()
	a.local.Close()
	a.peer.Close()
	settle(t, &w)
	noCall(t, a.called, "a forgotten connection's function")
}

// TestArmPeek: bytes the peer sends unasked end the session when end says
// so, and are left for the reader; other bytes leave the connection
// watched for its hang-up.
func TestArmPeek(t *testing.T) {
	end := func(b byte) bool { return b == 'E' }
	t.Run("ending", func(t *testing.T) {
		var w Watcher
		defer w.Close()
		a := arm(t, &w, end)
		if _, err := a.peer.Write([]byte("E fatal")); err != nil {
			t.Fatal(err)
		}
		waitCall(t, a.called, "an ending message")
		buf := make([]byte, 7)
		if n, err := a.local.Read(buf); err != nil || string(buf[:n]) != "E fatal" {
			t.Fatalf("Read = %q, %v: the message was not left for the reader", buf[:n], err)
		}
	})
	t.Run("other", func(t *testing.T) {
		var w Watcher
		defer w.Close()
		a := arm(t, &w, end)
		if _, err := a.peer.Write([]byte("N notice")); err != nil {
			t.Fatal(err)
		}
		settle(t, &w)
		noCall(t, a.called, "a message that does not end the session")
		a.peer.Close()
		waitCall(t, a.called, "close after a message")
	})
}

// TestArmPeekBusy: a connection alternately armed with ArmPeek (idle) and
// Arm (a statement runs) is not woken by the bytes that come while it is
// armed with Arm (a reply); an ending message still waiting when ArmPeek
// arms it again calls at once.
func TestArmPeekBusy(t *testing.T) {
	var w Watcher
	defer w.Close()
	end := func(b byte) bool { return b == 'E' }
	a := arm(t, &w, end)
	a.c.Arm(func() { a.called <- struct{}{} })
	if _, err := a.peer.Write([]byte("E reply")); err != nil {
		t.Fatal(err)
	}
	settle(t, &w)
	noCall(t, a.called, "bytes while armed for hang-ups only")
	fn, called := signal()
	a.c.ArmPeek(fn, end)
	waitCall(t, called, "arming with ArmPeek over an ending message")
	noCall(t, a.called, "the function armed before")
}

// TestClosed: a closed Watcher arms nothing and starts no goroutine again
// (goleak checks).
func TestClosed(t *testing.T) {
	var w Watcher
	a := arm(t, &w, nil)
	w.Close()
	fn, called := signal()
	a.c.Arm(fn)
	a.peer.Close()
	noCall(t, called, "after Close")
	noCall(t, a.called, "after Close")
}

// BenchmarkArmBusyIdle is what a PostgreSQL session pays per statement:
// Arm when it starts (hang-ups only), ArmPeek when it ends.
func BenchmarkArmBusyIdle(b *testing.B) {
	var w Watcher
	defer w.Close()
	local, _ := pair(b)
	var c Conn
	c.Watch(&w, local)
	end := func(byte) bool { return true }
	for b.Loop() {
		c.Arm(func() {})
		c.ArmPeek(func() {}, end)
	}
}
