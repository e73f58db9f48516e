// Package benchkit holds what the benchmarks share: starting the real
// lifecycle server with a throwaway config, and percentiles.
package benchkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// StartServer runs the server binary on Docker with a throwaway config and
// store on a free loopback port and returns its address and a function
// that stops it and removes its files.
func StartServer(serverBin, execdBin, apiKey string) (addr string, stop func(), err error) {
	execdAbs, err := filepath.Abs(execdBin)
	if err != nil {
		return "", nil, err
	}
	return StartServerWith(serverBin, apiKey, func(dir string) string {
		return fmt.Sprintf("[runtime]\ntype = \"docker\"\nexecd_path = %q\n\n[store]\npath = %q\n", execdAbs, filepath.Join(dir, "store.db"))
	})
}

// StartServerWith is StartServer with the config's runtime part (any
// tables after [server] and [log]) from runtimeTOML, given the server's
// throwaway directory.
func StartServerWith(serverBin, apiKey string, runtimeTOML func(dir string) string) (addr string, stop func(), err error) {
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
	cfg := fmt.Sprintf("[server]\nhost = %q\nport = %s\napi_key = %q\n\n[log]\nlevel = \"warn\"\n\n", host, port, apiKey) + runtimeTOML(dir)
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
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("server did not become healthy within 60s")
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

// Call sends one lifecycle API request with apiKey, decodes the answer
// into out (when not nil) and returns the answer's headers; a status of
// 300 or more is an error.
func Call(method, url, apiKey string, in, out any) (http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(sandbox.APIKeyHeader, apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if out != nil {
		return resp.Header, json.Unmarshal(data, out)
	}
	return resp.Header, nil
}

// FirstCommand creates a sandbox through the API at base, asks for its
// execd endpoint and runs `echo hi` through it, and returns the time all
// that took; the sandbox is deleted afterwards (not timed).
func FirstCommand(base, apiKey string, req sandbox.CreateSandboxRequest) (time.Duration, error) {
	t0 := time.Now()
	var created sandbox.CreateSandboxResponse
	if _, err := Call("POST", base+"/v1/sandboxes", apiKey, req, &created); err != nil {
		return 0, err
	}
	defer Call("DELETE", base+"/v1/sandboxes/"+created.ID, apiKey, nil, nil)
	var ep sandbox.Endpoint
	if _, err := Call("GET", base+"/v1/sandboxes/"+created.ID+"/endpoints/44772", apiKey, nil, &ep); err != nil {
		return 0, err
	}
	got, err := EchoHi(ep)
	if err != nil {
		return 0, err
	}
	d := time.Since(t0)
	if got != "hi" {
		return 0, fmt.Errorf("sandbox %s: the first command printed %q", created.ID, got)
	}
	return d, nil
}

// EchoHi runs `echo hi` through execd at ep and returns what it printed
// last on stdout.
func EchoHi(ep sandbox.Endpoint) (string, error) {
	req, err := http.NewRequest("POST", "http://"+ep.Endpoint+"/command", strings.NewReader(`{"command":"echo hi"}`))
	if err != nil {
		return "", err
	}
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	er := sandbox.NewEventReader(resp.Body)
	got := ""
	for {
		ev, err := er.Next()
		if err != nil {
			return got, nil
		}
		if ev.Type == sandbox.EventStdout {
			got = ev.Text
		}
	}
}
