package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// tracer records when a hand-off process's table-driver statements ran, by
// kind, and when its process heard the lock's release notified.
type tracer struct {
	mu    sync.Mutex
	stmts []stmt
	heard []int64
}

// stmt is one traced statement: its kind (kindOf) and when it started and
// ended (Unix ns).
type stmt struct {
	kind       string
	start, end int64
}

type stmtKey struct{}

// kindOf tells the table driver's statements apart by their text: a
// release (which notifies), an acquisition attempt, or another.
func kindOf(sql string) string {
	switch {
	case strings.Contains(sql, "SET token = '', expires_at = 'epoch'"):
		return "release"
	case strings.Contains(sql, "ON CONFLICT") || strings.Contains(sql, "AS l SET token = $2"):
		return "attempt"
	}
	return ""
}

// TraceQueryStart notes the statement's start.
func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, stmtKey{}, stmt{kind: kindOf(d.SQL), start: time.Now().UnixNano()})
}

// TraceQueryEnd records the statement.
func (t *tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if s, ok := ctx.Value(stmtKey{}).(stmt); ok && s.kind != "" {
		s.end = time.Now().UnixNano()
		t.mu.Lock()
		t.stmts = append(t.stmts, s)
		t.mu.Unlock()
	}
}

// hear records a release of the measured lock heard now.
func (t *tracer) hear() {
	now := time.Now().UnixNano()
	t.mu.Lock()
	t.heard = append(t.heard, now)
	t.mu.Unlock()
}

// fill completes tu, the turn just ended, from what was traced since the
// previous one, and forgets it. It does nothing on a nil tracer.
func (t *tracer) fill(tu *turn) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.stmts {
		switch {
		case s.kind == "attempt" && s.start < tu.got:
			tu.tries++
			tu.lastTry = s.start
		case s.kind == "release" && s.start >= tu.relStart:
			tu.updated = s.end
		}
	}
	// the subscriber hears a release just after the driver's waiting
	// Acquire is woken, sometimes after its attempt started: the last
	// release heard before the lock was got counts
	call := tu.got - int64(tu.wait)
	for _, h := range t.heard {
		if h >= call && h <= tu.got {
			tu.heard = h
		}
	}
	t.stmts, t.heard = t.stmts[:0], t.heard[:0]
}

// phaseNames are the parts of a traced hand-off, from the holder's release
// start to the next holder's acquisition (the first overlaps the second).
// The release's UPDATE notifies the next holder itself, at its commit,
// often before its answer reaches the releaser: the NOTIFY is timed from
// the release's start.
var phaseNames = []string{"release UPDATE", "release start → NOTIFY heard", "heard → last attempt", "last attempt"}

// tracedPhases returns, from turns sorted by acquisition, the p50s then
// the p99s of the phases of the hand-offs (nil when not traced), and the
// share of hand-offs whose next holder heard no NOTIFY of that release
// (those count in the first and last phases only).
func tracedPhases(turns []turn) (_ []time.Duration, unwokenShare, triesMean float64) {
	ph := make([][]time.Duration, len(phaseNames))
	unwoken, n, tries := 0, 0, int64(0)
	for i := 1; i < len(turns); i++ {
		prev, cur := turns[i-1], turns[i]
		if cur.tries == 0 || prev.updated == 0 {
			continue
		}
		n++
		tries += cur.tries
		ph[0] = append(ph[0], time.Duration(prev.updated-prev.relStart))
		ph[3] = append(ph[3], time.Duration(cur.got-cur.lastTry))
		if cur.heard < prev.relStart {
			unwoken++
			continue
		}
		ph[1] = append(ph[1], time.Duration(cur.heard-prev.relStart))
		ph[2] = append(ph[2], max(time.Duration(cur.lastTry-cur.heard), 0))
	}
	if n == 0 {
		return nil, 0, 0
	}
	var out []time.Duration
	for _, p := range []float64{50, 99} {
		for _, ds := range ph {
			out = append(out, stats.Percentile(ds, p))
		}
	}
	return out, float64(unwoken) / float64(n), float64(tries) / float64(n)
}

// printPhases prints the traced configurations' phases.
func printPhases(cs []handoffConfig, runs [][]runStats) {
	fmt.Println()
	fmt.Println("Phases of the traced hand-offs (8 processes; the driver on a pool with a pgx tracer), p50 / p99, medians of the runs:")
	fmt.Println()
	fmt.Println("| configuration | " + strings.Join(phaseNames, " | ") + " | next holder heard no NOTIFY of that release | attempts per acquisition |")
	fmt.Println("|---" + strings.Repeat("|---", len(phaseNames)+2) + "|")
	for i, c := range cs {
		m := medians(runs[i])
		if m.phases == nil {
			continue
		}
		cells := []string{c.label()}
		k := len(phaseNames)
		for j := range k {
			cells = append(cells, ms(m.phases[j])+" / "+ms(m.phases[k+j]))
		}
		cells = append(cells, fmt.Sprintf("%.0f%%", 100*m.unwoken), fmt.Sprintf("%.1f", m.tries))
		fmt.Println("| " + strings.Join(cells, " | ") + " |")
	}
}
