package testutil

import "net"

// Reset aborts every open connection with a TCP reset (SO_LINGER 0, so
// both ends get an RST rather than a FIN), as a middlebox dropping the
// connections would; new connections are accepted as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}
