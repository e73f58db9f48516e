// Package benchkit holds what the benchmarks share: starting the real
// lifecycle server with a throwaway config, and percentiles.
package benchkit

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// StartServer runs the server binary with a throwaway config and store
// on a free loopback port and returns its address and a function that
// stops it and removes its files.
func StartServer(serverBin, execdBin, apiKey string) (addr string, stop func(), err error) {
	execdAbs, err := filepath.Abs(execdBin)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "opensandbox-bench-")
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	host, port, _ := strings.Cut(addr, ":")
	cfg := fmt.Sprintf("[server]\nhost = %q\nport = %s\napi_key = %q\n\n[log]\nlevel = \"warn\"\n\n[runtime]\ntype = \"docker\"\nexecd_path = %q\n\n[store]\npath = %q\n",
		host, port, apiKey, execdAbs, filepath.Join(dir, "store.db"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return "", nil, err
	}
	srv := exec.Command(serverBin, "--config", cfgPath)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { srv.Process.Signal(os.Interrupt); srv.Wait(); os.RemoveAll(dir) }
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("server did not become healthy within 30s")
		}
		time.Sleep(20 * time.Millisecond) // polling the health route, bounded by the deadline
	}
}

// Percentile returns the q-th percentile (0-100) of d, nearest rank.
func Percentile(d []time.Duration, q int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*q/100]
}
