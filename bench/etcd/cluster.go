package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cluster is a throwaway etcd cluster on loopback ports.
type cluster struct {
	endpoints []string
	cmds      []*exec.Cmd
	dir       string
}

// startCluster starts n members from the etcd binary and waits until each
// reports itself healthy.
func startCluster(n int) (*cluster, error) {
	dir, err := os.MkdirTemp("", "etcd-bench-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	peers := make([]string, n)
	clients := make([]int, n)
	for i := range n {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		clients[i] = cp
		peers[i] = fmt.Sprintf("m%d=http://127.0.0.1:%d", i, pp)
	}
	for i := range n {
		name, peerURL, _ := strings.Cut(peers[i], "=")
		clientURL := "http://127.0.0.1:" + strconv.Itoa(clients[i])
		cmd := exec.Command("etcd", "--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--logger", "zap", "--log-outputs", filepath.Join(dir, name+".log"))
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("start etcd (Debian's etcd-server package has it): %w", err)
		}
		c.cmds = append(c.cmds, cmd)
		c.endpoints = append(c.endpoints, "127.0.0.1:"+strconv.Itoa(clients[i]))
	}
	cl := &http.Client{Timeout: time.Second}
	for _, ep := range c.endpoints {
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := cl.Get("http://" + ep + "/health")
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("etcd at %s not healthy within 20 s", ep)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// stop kills the members and removes their data.
func (c *cluster) stop() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	_ = os.RemoveAll(c.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
