package testutil

import (
	"errors"
	"os"
)

// Signal sends sig to the server's process: SIGSTOP and SIGCONT freeze and
// thaw it (a replica frozen while its master's link is cut cannot
// reconnect and fall back in sync). It fails when the server is not
// running.
func (s *RedisServer) Signal(sig os.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("testutil: redis-server is not running")
	}
	return cmd.Process.Signal(sig)
}
