// Command execd-bench measures execd against a baseline taken in the same
// run on the same machine, and prints each figure as a ratio:
//
//   - command round trip: POST /command "echo hi" read to the end of its
//     stream, against fork/exec of the same shell command directly;
//   - download throughput: GET /files/download of a large file, against
//     reading the same (cached) file locally, with the raw loopback TCP
//     ceiling (sendfile over a bare connection) measured alongside;
//   - idle RSS of the execd process after it has served requests.
//
// Absolute times on a shared machine are noise; ratios are what we track.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func main() {
	execdPath := flag.String("execd", "bin/execd", "path to the execd binary")
	rounds := flag.Int("rounds", 300, "command round trips to time")
	sizeMiB := flag.Int("download-mib", 512, "size of the download test file")
	flag.Parse()
	if err := run(*execdPath, *rounds, *sizeMiB); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(execdPath string, rounds, sizeMiB int) error {
	tmp, err := os.MkdirTemp("", "execd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	base, stop, pid, err := startExecd(execdPath)
	if err != nil {
		return err
	}
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	// Command round trip.
	for range 20 { // warm up both paths
		if err := roundTrip(client, base); err != nil {
			return err
		}
		exec.Command("bash", "-c", "echo hi").Output()
	}
	ours := make([]time.Duration, 0, rounds)
	direct := make([]time.Duration, 0, rounds)
	for range rounds {
		t0 := time.Now()
		if err := roundTrip(client, base); err != nil {
			return err
		}
		ours = append(ours, time.Since(t0))
		t0 = time.Now()
		if out, err := exec.Command("bash", "-c", "echo hi").Output(); err != nil || string(out) != "hi\n" {
			return fmt.Errorf("direct exec: %q %v", out, err)
		}
		direct = append(direct, time.Since(t0))
	}
	op50, op95 := percentile(ours, 50), percentile(ours, 95)
	dp50, dp95 := percentile(direct, 50), percentile(direct, 95)
	fmt.Printf("command round trip (echo hi, n=%d): execd p50 %v p95 %v | direct fork/exec p50 %v p95 %v | ratio p50 %.2f p95 %.2f | target p50 <= 3ms: %s\n",
		rounds, ms(op50), ms(op95), ms(dp50), ms(dp95), ratio(op50, dp50), ratio(op95, dp95), verdict(op50 <= 3*time.Millisecond))

	// Download throughput.
	path := filepath.Join(tmp, "blob")
	if err := writeFile(path, int64(sizeMiB)<<20); err != nil {
		return err
	}
	var oursBest, localBest, tcpBest float64
	for range 3 {
		local, err := timeLocalRead(path)
		if err != nil {
			return err
		}
		remote, err := timeDownload(client, base, path)
		if err != nil {
			return err
		}
		tcp, err := timeRawTCP(path)
		if err != nil {
			return err
		}
		localBest = max(localBest, local)
		oursBest = max(oursBest, remote)
		tcpBest = max(tcpBest, tcp)
	}
	fmt.Printf("download throughput (%d MiB, best of 3): execd %.0f MiB/s | local read %.0f MiB/s | ratio %.2f | target >= 0.50: %s\n",
		sizeMiB, oursBest, localBest, oursBest/localBest, verdict(oursBest/localBest >= 0.5))
	fmt.Printf("  loopback ceiling: raw TCP sendfile of the same file %.0f MiB/s (%.2f of local read) | execd/raw TCP ratio %.2f\n",
		tcpBest, tcpBest/localBest, oursBest/tcpBest)

	// Idle RSS after the work above, once the Go runtime has settled.
	client.CloseIdleConnections()
	rss, err := rssMiB(pid)
	if err != nil {
		return err
	}
	fmt.Printf("execd idle RSS: %.1f MiB | target <= 15 MiB: %s\n", rss, verdict(rss <= 15))
	return nil
}

func startExecd(path string) (string, func(), int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(path, "--addr", addr, "--log-level", "3")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, 0, fmt.Errorf("start execd: %w", err)
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base, stop, cmd.Process.Pid, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, 0, fmt.Errorf("execd did not answer /ping: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var echoBody = []byte(`{"command":"echo hi"}`)

func roundTrip(c *http.Client, base string) error {
	resp, err := c.Post(base+"/command", "application/json", bytes.NewReader(echoBody))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	er := sandbox.NewEventReader(resp.Body)
	var got string
	for {
		ev, err := er.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if ev.Type == sandbox.EventStdout {
			got = ev.Text
		}
		if ev.Type == sandbox.EventError {
			return fmt.Errorf("echo failed: %+v", ev.Error)
		}
	}
	if got != "hi" {
		return fmt.Errorf("echo printed %q", got)
	}
	return nil
}

func writeFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for written := int64(0); written < size; written += int64(len(chunk)) {
		if _, err := f.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

func timeLocalRead(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	t0 := time.Now()
	n, err := drain(f)
	if err != nil {
		return 0, err
	}
	return mibPerSec(n, time.Since(t0)), nil
}

func timeDownload(c *http.Client, base, path string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/files/download?path="+url.QueryEscape(path), nil)
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("download status %d", resp.StatusCode)
	}
	n, err := drain(resp.Body)
	if err != nil {
		return 0, err
	}
	return mibPerSec(n, time.Since(t0)), nil
}

// timeRawTCP measures the most any server can send over loopback here: a
// bare TCP connection fed by sendfile, read like the download.
func timeRawTCP(path string) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		io.Copy(c, f) // *net.TCPConn.ReadFrom uses sendfile
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	t0 := time.Now()
	n, err := drain(c)
	if err != nil {
		return 0, err
	}
	return mibPerSec(n, time.Since(t0)), nil
}

// drain reads r to the end with the same 1 MiB buffer for both sides of the
// comparison (io.Discard's own ReadFrom would read in 8 KiB pieces).
func drain(r io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, err := r.Read(buf)
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				return 0, err
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func mibPerSec(n int64, d time.Duration) float64 { return float64(n) / (1 << 20) / d.Seconds() }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
