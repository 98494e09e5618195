//go:build linux

package file_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
)

func TestFactory(t *testing.T) {
	f := file.Factory()
	if f.Type != "file" || f.ClientType != nil {
		t.Fatalf("factory %q, client type %v", f.Type, f.ClientType)
	}
	dir := t.TempDir()
	tests := []struct {
		name    string
		opts    map[string]any
		client  any
		wantErr string // "" when valid
	}{
		{"minimal", map[string]any{"dir": dir}, nil, ""},
		{"every key", map[string]any{"dir": dir, "dirMode": "0750", "fileMode": 0o640, "busyTimeout": 500, "sync": true, "mechanism": "flock"}, nil, ""},
		{"durations as strings", map[string]any{"dir": dir, "busyTimeout": "250ms", "dirMode": "0o700"}, nil, ""},
		{"unknown key", map[string]any{"dir": dir, "adress": "x"}, nil, "mutex.orders.driver.adress: unknown key"},
		{"no dir", map[string]any{}, nil, "mutex.orders.driver.dir: required"},
		{"bad dir mode", map[string]any{"dir": dir, "dirMode": "0800"}, nil, "mutex.orders.driver.dirMode: invalid mode"},
		{"dir mode out of range", map[string]any{"dir": dir, "dirMode": 700}, nil, "mutex.orders.driver.dirMode: invalid mode"},
		{"bad file mode type", map[string]any{"dir": dir, "fileMode": []int{1}}, nil, "mutex.orders.driver.fileMode: invalid mode"},
		{"negative busy timeout", map[string]any{"dir": dir, "busyTimeout": "-1s"}, nil, "mutex.orders.driver.busyTimeout: must be positive"},
		{"bad duration", map[string]any{"dir": dir, "busyTimeout": "soon"}, nil, "mutex.orders.driver.busyTimeout"},
		{"bad mechanism", map[string]any{"dir": dir, "mechanism": "fcntl"}, nil, `mutex.orders.driver.mechanism: unknown mechanism "fcntl"`},
		{"client given", map[string]any{"dir": dir}, struct{}{}, "mutex.orders.driver.client"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := f.New(drivers.Spec{Path: "mutex.orders.driver", Options: tc.opts, Client: tc.client, Logger: zap.NewNop()})
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("New: err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if err := d.Close(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFactoryModes: the configured modes reach the directory and files.
func TestFactoryModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	d, err := file.Factory().New(drivers.Spec{Path: "mutex.x.driver", Options: map[string]any{"dir": dir, "dirMode": "0711", "fileMode": "0604"}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close(ctxT(t)) }()
	if res, err := d.Acquire(ctxT(t), drivers.AcquireRequest{Key: "k", Token: "t", TTL: 1e9}); err != nil || !res.Acquired {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The umask may remove bits, never add them (and never the owner's).
	if p := st.Mode().Perm(); p&^0o711 != 0 || p&0o700 != 0o700 {
		t.Errorf("dir mode %v, want 0711 less the umask", p)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	st, err = os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Mode().Perm(); p&^0o604 != 0 || p&0o600 != 0o600 {
		t.Errorf("file mode %v, want 0604 less the umask", p)
	}
}
