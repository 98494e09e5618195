//go:build linux

package faultsuite

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// CheckBinaries reports a server program the mode's throwaway store needs
// and this machine lacks, naming it (scripts/stores.sh installs them).
func (m Mode) CheckBinaries() error {
	var need []string
	switch m.Name {
	case "redis", "sentinel", "cluster":
		need = []string{"redis-server"}
	case "postgres-advisory", "postgres-table":
		if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(dirs) > 0 {
			return nil
		}
		need = []string{"initdb", "pg_ctl"}
	case "mysql-advisory", "mysql-table":
		need = []string{"mariadb-install-db", "/usr/sbin/mariadbd"}
	case "etcd":
		need = []string{"etcd"}
	}
	for _, b := range need {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("faultsuite: store %s needs the server program %s, not found (scripts/stores.sh installs it): %w", m.Name, b, err)
		}
	}
	return nil
}
