package testutil

import "sync"

// StatementLog records the statements a test's store connections run, by
// whatever name the test gives them. Safe for concurrent use.
type StatementLog struct {
	mu  sync.Mutex
	got []string
}

// Add records a statement.
func (l *StatementLog) Add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, name)
}

// Take returns the statements recorded since the last call.
func (l *StatementLog) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.got
	l.got = nil
	return got
}
