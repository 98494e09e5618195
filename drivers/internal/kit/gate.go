package kit

import (
	"context"
	"sync"
)

// Gate holds calls back while it is shut: a store found down (until it
// answers again), a link a test stalls. The zero value is open. It is safe
// for concurrent use.
type Gate struct {
	mu   sync.Mutex
	shut chan struct{} // closed by Open; nil while open
}

// Shut shuts the gate; a shut gate stays as it is.
func (g *Gate) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut == nil {
		g.shut = make(chan struct{})
	}
}

// Open opens the gate, letting every waiting call through; an open gate
// stays as it is.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
}

// Wait returns nil at once while the gate is open; while it is shut, nil
// when it opens or ctx's error when ctx ends first.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if shut == nil {
		return nil
	}
	select {
	case <-shut:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
