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
// kind.
type tracer struct {
	mu    sync.Mutex
	stmts []stmt
}

// stmt is one traced statement: its kind (kindOf) and when it started and
// ended (Unix ns).
type stmt struct {
	kind       string
	start, end int64
}

type stmtKey struct{}

// kindOf tells the table driver's statements apart by their text: a
// release (which grants or notifies), an acquisition attempt, or another.
func kindOf(sql string) string {
	switch {
	case strings.Contains(sql, "SET (token, fence, expires_at, queue) = (SELECT"), strings.Contains(sql, "SET token = '', expires_at = 'epoch'"):
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
	t.stmts = t.stmts[:0]
}

// phaseNames are the parts of a traced hand-off: the holder's release
// statement, then until the next holder has the lock (the NOTIFY of a
// grant, or of a wake-up and the waiter's attempt).
var phaseNames = []string{"release UPDATE", "release end → next holder has it"}

// tracedPhases returns, from turns sorted by acquisition, the p50s then
// the p99s of the phases of the hand-offs (nil when not traced), the share
// of hand-offs whose next holder made no attempt after the release started
// (the release granted it the lock), and the attempts per acquisition.
func tracedPhases(turns []turn) (_ []time.Duration, grantedShare, triesMean float64) {
	ph := make([][]time.Duration, len(phaseNames))
	granted, n, tries := 0, 0, int64(0)
	for i := 1; i < len(turns); i++ {
		prev, cur := turns[i-1], turns[i]
		if cur.tries == 0 || prev.updated == 0 {
			continue
		}
		n++
		tries += cur.tries
		ph[0] = append(ph[0], time.Duration(prev.updated-prev.relStart))
		ph[1] = append(ph[1], max(time.Duration(cur.got-prev.updated), 0))
		if cur.lastTry < prev.relStart {
			granted++
		}
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
	return out, float64(granted) / float64(n), float64(tries) / float64(n)
}

// printPhases prints the traced configurations' phases.
func printPhases(cs []handoffConfig, runs [][]runStats) {
	fmt.Println()
	fmt.Println("Phases of the traced hand-offs (8 processes; the driver on a pool with a pgx tracer), p50 / p99, medians of the runs:")
	fmt.Println()
	fmt.Println("| configuration | " + strings.Join(phaseNames, " | ") + " | granted by the release (no attempt after it) | attempts per acquisition |")
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
		cells = append(cells, fmt.Sprintf("%.0f%%", 100*m.granted), fmt.Sprintf("%.1f", m.tries))
		fmt.Println("| " + strings.Join(cells, " | ") + " |")
	}
}
