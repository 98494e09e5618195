//go:build linux

package hangup

import (
	"net"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection, closed when the
// test ends.
func pair(t *testing.T) (local *net.TCPConn, peer *net.TCPConn) {
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
			local, peer := pair(t)
			var c Conn
			fn, called := signal()
			w.Arm(&c, local, fn)
			if _, err := peer.Write([]byte("reply")); err != nil {
				t.Fatal(err)
			}
			// a second connection's hang-up, seen after any event of the
			// first's reply (epoll reports readiness in order)
			local2, peer2 := pair(t)
			var c2 Conn
			fn2, called2 := signal()
			w.Arm(&c2, local2, fn2)
			peer2.Close()
			waitCall(t, called2, "second connection's close")
			noCall(t, called, "bytes from the peer")
			tc.fault(peer)
			waitCall(t, called, tc.name)
			noCall(t, called, tc.name+" (twice)")
		})
	}
}

// TestDisarm: a hang-up while disarmed calls nothing; arming again calls
// the new function at once.
func TestDisarm(t *testing.T) {
	var w Watcher
	defer w.Close()
	local, peer := pair(t)
	var c Conn
	fn1, called1 := signal()
	w.Arm(&c, local, fn1)
	w.Disarm(&c)
	peer.Close()
	// the hang-up fires with nothing armed; then the new function is armed
	local2, peer2 := pair(t)
	var c2 Conn
	fn2, called2 := signal()
	w.Arm(&c2, local2, fn2)
	peer2.Close()
	waitCall(t, called2, "second connection's close")
	fn3, called3 := signal()
	w.Arm(&c, local, fn3)
	waitCall(t, called3, "arming after a hang-up")
	noCall(t, called1, "a disarmed function")
}

// TestForget: a forgotten connection can be closed and its descriptor
// reused; the new connection's hang-up calls only its own function.
func TestForget(t *testing.T) {
	var w Watcher
	defer w.Close()
	local, peer := pair(t)
	var c Conn
	fn1, called1 := signal()
	w.Arm(&c, local, fn1)
	w.Forget(&c)
	local.Close()
	peer.Close()
	local2, peer2 := pair(t)
	var c2 Conn
	fn2, called2 := signal()
	w.Arm(&c2, local2, fn2)
	peer2.Close()
	waitCall(t, called2, "the new connection's close")
	noCall(t, called1, "a forgotten connection's function")
}

// TestArmPeek: bytes the peer sends unasked end the session when end says
// so; other bytes leave the connection watched for its hang-up.
func TestArmPeek(t *testing.T) {
	end := func(b byte) bool { return b == 'E' }
	t.Run("ending", func(t *testing.T) {
		var w Watcher
		defer w.Close()
		local, peer := pair(t)
		var c Conn
		fn, called := signal()
		w.ArmPeek(&c, local, fn, end)
		if _, err := peer.Write([]byte("E fatal")); err != nil {
			t.Fatal(err)
		}
		waitCall(t, called, "an ending message")
		buf := make([]byte, 7)
		if n, err := local.Read(buf); err != nil || string(buf[:n]) != "E fatal" {
			t.Fatalf("Read = %q, %v: the message was not left for the reader", buf[:n], err)
		}
	})
	t.Run("other", func(t *testing.T) {
		var w Watcher
		defer w.Close()
		local, peer := pair(t)
		var c Conn
		fn, called := signal()
		w.ArmPeek(&c, local, fn, end)
		if _, err := peer.Write([]byte("N notice")); err != nil {
			t.Fatal(err)
		}
		local2, peer2 := pair(t)
		var c2 Conn
		fn2, called2 := signal()
		w.Arm(&c2, local2, fn2)
		peer2.Close()
		waitCall(t, called2, "second connection's close")
		noCall(t, called, "a message that does not end the session")
		peer.Close()
		waitCall(t, called, "close after a message")
	})
}

// TestClosed: a closed Watcher arms nothing and starts no goroutine again
// (goleak checks).
func TestClosed(t *testing.T) {
	var w Watcher
	local, peer := pair(t)
	var c Conn
	fn, called := signal()
	w.Arm(&c, local, fn)
	w.Close()
	w.Arm(&c, local, fn)
	peer.Close()
	noCall(t, called, "after Close")
}
