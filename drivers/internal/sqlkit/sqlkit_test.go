package sqlkit

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

// TestSlot: a held slot is not taken again; LockContext gives up with the
// cause of the context that ended, and takes a free slot even with both
// ended.
func TestSlot(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	ended := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	var s Slot
	if err := s.LockContext(ended(errA), ended(errB)); err != nil {
		t.Fatalf("LockContext of a free slot = %v", err)
	}
	if s.TryLock() {
		t.Fatal("TryLock of a held slot succeeded")
	}
	for _, tc := range []struct {
		name      string
		ctx, also context.Context
		want      error
	}{
		{"ctx", ended(errA), nil, errA},
		{"also", context.Background(), ended(errB), errB},
	} {
		if err := s.LockContext(tc.ctx, tc.also); !errors.Is(err, tc.want) {
			t.Errorf("%s: LockContext of a held slot = %v; want %v", tc.name, err, tc.want)
		}
	}
	s.Unlock()
	if !s.TryLock() {
		t.Fatal("TryLock of a freed slot failed")
	}
	s.Unlock()
}

// TestLifeClose: Close's calls are cut when its ctx ends before release is
// done (Close then returns ctx's error, named), or when release is done;
// begin runs once, after the life is closed.
func TestLifeClose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // Close's ctx; release takes a second
		wantErr bool
	}{
		{"ctx ends first", time.Millisecond, true},
		{"release first", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var l Life
				l.Init()
				call, stop := l.Bind(context.Background())
				defer stop()
				if err := l.Check(context.Background()); err != nil || l.Closed() {
					t.Fatalf("open: Check = %v, Closed = %v", err, l.Closed())
				}
				ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
				defer cancel()
				var cut atomic.Bool
				begun := 0
				err := l.Close(ctx, "test", func() {
					begun++
					if err := l.Check(context.Background()); !errors.Is(err, drivers.ErrClosed) {
						t.Errorf("Check in begin = %v", err)
					}
				}, func(context.Context) error {
					select {
					case <-call.Done():
					case <-time.After(time.Second):
					}
					return nil
				}, func() { cut.Store(true) })
				<-call.Done() // (cancelled by an AfterFunc of the life)
				if (err != nil) != tc.wantErr || !cut.Load() || !errors.Is(context.Cause(call), drivers.ErrClosed) {
					t.Fatalf("Close = %v, cut %v, call's cause %v", err, cut.Load(), context.Cause(call))
				}
				if err := l.Close(context.Background(), "test", func() { begun++ }, nil, nil); err != nil || begun != 1 {
					t.Fatalf("second Close = %v, begin run %d times; want nil, once", err, begun)
				}
				if err := l.ClosedErr(errors.New("x")); !errors.Is(err, drivers.ErrClosed) {
					t.Fatalf("ClosedErr after Close = %v", err)
				}
			})
		})
	}
}

// TestLifeSecondClose: a second Close waits for the first to finish, or
// for its own ctx.
func TestLifeSecondClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Life
		l.Init()
		release := make(chan struct{})
		first := make(chan error, 1)
		go func() {
			first <- l.Close(context.Background(), "x", nil, func(context.Context) error { <-release; return nil }, nil)
		}()
		synctest.Wait()
		second := make(chan error, 1)
		go func() { second <- l.Close(context.Background(), "x", nil, nil, nil) }()
		synctest.Wait()
		select {
		case err := <-second:
			t.Fatalf("a second Close returned (%v) while the first was still releasing", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := l.Close(ctx, "x", nil, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with an ending ctx = %v; want DeadlineExceeded", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	})
}

// TestReclaimerDrain: rounds run until one deletes fewer than a batch or
// fails.
func TestReclaimerDrain(t *testing.T) {
	errRound := errors.New("round")
	for _, tc := range []struct {
		name      string
		rounds    []int64
		failAt    int // -1: none
		wantTotal int64
		wantRuns  int
	}{
		{"short round ends", []int64{10, 10, 3, 10}, -1, 23, 3},
		{"error ends", []int64{10, 10, 10}, 1, 20, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			r := Reclaimer{Batch: 10, Round: func(context.Context) (int64, error) {
				runs++
				if runs-1 == tc.failAt {
					return tc.rounds[runs-1], errRound
				}
				return tc.rounds[runs-1], nil
			}}
			total, err := r.Drain(context.Background())
			if total != tc.wantTotal || runs != tc.wantRuns || (tc.failAt >= 0) != errors.Is(err, errRound) {
				t.Fatalf("Drain = %d, %v after %d rounds; want %d after %d", total, err, runs, tc.wantTotal, tc.wantRuns)
			}
		})
	}
}

// TestSchema: Ensure creates until it succeeds, then not again until Lost.
func TestSchema(t *testing.T) {
	errCreate := errors.New("create")
	var s Schema
	calls := 0
	create := func(fail bool) func(context.Context) error {
		return func(context.Context) error {
			calls++
			if fail {
				return errCreate
			}
			return nil
		}
	}
	for i, tc := range []struct {
		lost, fail bool
		wantCalls  int
		wantErr    error
	}{
		{fail: true, wantCalls: 1, wantErr: errCreate},
		{wantCalls: 2},
		{wantCalls: 2}, // ready: not called
		{lost: true, wantCalls: 3},
	} {
		if tc.lost {
			s.Lost()
		}
		if err := s.Ensure(context.Background(), create(tc.fail)); !errors.Is(err, tc.wantErr) || calls != tc.wantCalls {
			t.Fatalf("step %d: Ensure = %v after %d creates; want %v after %d", i, err, calls, tc.wantErr, tc.wantCalls)
		}
	}
}

// TestSchemaRun: f runs once more, after the schema is created again,
// only when its error says the schema is gone, and only once.
func TestSchemaRun(t *testing.T) {
	errGone, errOther := errors.New("gone"), errors.New("other")
	for _, tc := range []struct {
		name                 string
		errs                 []error // f's error in each run
		wantRuns, wantCreate int
		wantErr              error
	}{
		{"ok", []error{nil}, 1, 1, nil},
		{"other error", []error{errOther}, 1, 1, errOther},
		{"gone, then ok", []error{errGone, nil}, 2, 2, nil},
		{"gone twice", []error{errGone, errGone}, 2, 2, errGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Schema
			runs, creates := 0, 0
			ensure := func() error {
				return s.Ensure(context.Background(), func(context.Context) error { creates++; return nil })
			}
			err := s.Run(ensure, func(err error) bool { return errors.Is(err, errGone) }, func() error {
				runs++
				return tc.errs[runs-1]
			})
			if runs != tc.wantRuns || creates != tc.wantCreate || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("Run = %v after %d runs, %d creations; want %v after %d, %d", err, runs, creates, tc.wantErr, tc.wantRuns, tc.wantCreate)
			}
		})
	}
}

// TestIdentity: the holder part of a token, within the limit.
func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		token string
		limit int
		want  string
	}{
		{"r4nd~orders~host-1~4242~t1me", 0, "~orders~host-1~4242"},
		{"r4nd~orders~host-1~4242~t1me", 19, "~orders~host-1~4242"},
		{"r4nd~orders~host-1~4242~t1me", 18, ""},
		{"plain-token", 0, ""},
		{"one~tilde", 0, ""},
	} {
		if got := Identity(tc.token, tc.limit); got != tc.want {
			t.Errorf("Identity(%q, %d) = %q; want %q", tc.token, tc.limit, got, tc.want)
		}
	}
}

// TestIdentify: an identity is written when it differs from the one
// shown, and counts as shown only once written.
func TestIdentify(t *testing.T) {
	errWrite := errors.New("write")
	var shown string
	var writes []string
	fail := false
	write := func(id string) error {
		writes = append(writes, id)
		if fail {
			return errWrite
		}
		return nil
	}
	steps := []struct {
		token     string
		fail      bool
		wantErr   bool
		wantShown string
	}{
		{"r~app~host~1~x", false, false, "~app~host~1"},
		{"s~app~host~1~y", false, false, "~app~host~1"}, // the same identity: no write
		{"t~app~host~2~z", true, true, "~app~host~1"},   // failed: still the old one
		{"t~app~host~2~z", false, false, "~app~host~2"},
	}
	for i, st := range steps {
		fail = st.fail
		err := Identify(&shown, st.token, 0, write)
		if (err != nil) != st.wantErr || shown != st.wantShown {
			t.Fatalf("step %d: Identify = %v, shown %q; want error %v, shown %q", i, err, shown, st.wantErr, st.wantShown)
		}
	}
	if want := []string{"~app~host~1", "~app~host~2", "~app~host~2"}; !slices.Equal(writes, want) {
		t.Fatalf("writes = %q; want %q", writes, want)
	}
}

// TestConns: Cut closes the open connections (after their cut hook) and
// fails later dials; a connection closed before is forgotten.
func TestConns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var cs Conns
	var d net.Dialer
	hooked := 0
	dial := func() (*Conn, error) {
		return cs.Dial(context.Background(), d.DialContext, "tcp", ln.Addr().String(), func() { hooked++ })
	}
	closed, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	open, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.SyscallConn(); err != nil {
		t.Fatalf("SyscallConn: %v", err)
	}
	cs.Cut()
	if _, err := open.Write([]byte("x")); !errors.Is(err, net.ErrClosed) || hooked != 1 {
		t.Fatalf("Write after Cut = %v, cut hooks run %d; want net.ErrClosed, 1", err, hooked)
	}
	if c, err := dial(); c != nil || !errors.Is(err, drivers.ErrClosed) {
		t.Fatalf("Dial after Cut = %v, %v; want ErrClosed", c, err)
	}
}

// TestRetry: attempts go on while again allows; a ctx ending in a pause
// returns its cause and f's last error.
func TestRetry(t *testing.T) {
	errF := errors.New("f")
	synctest.Test(t, func(t *testing.T) {
		runs := 0
		err := Retry(context.Background(), backoff.Policy{Start: time.Millisecond}, func() error {
			runs++
			if runs < 3 {
				return errF
			}
			return nil
		}, func(int, error) bool { return true })
		if err != nil || runs != 3 {
			t.Fatalf("Retry = %v after %d runs; want nil after 3", err, runs)
		}
		runs = 0
		err = Retry(context.Background(), backoff.Policy{Start: time.Millisecond}, func() error { runs++; return errF },
			func(attempt int, _ error) bool { return attempt < 2 })
		if !errors.Is(err, errF) || runs != 2 {
			t.Fatalf("Retry = %v after %d runs; want f after 2", err, runs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = Retry(ctx, backoff.Policy{Start: time.Hour}, func() error { return errF }, func(int, error) bool { return true })
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errF) {
			t.Fatalf("Retry with ctx ending in a pause = %v; want its deadline and f", err)
		}
	})
}
