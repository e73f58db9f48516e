// Command code-bench measures the code interpreter's round trip: execd runs
// `1+1` in a warm Python context (POST /code, read until
// execution_complete) against spawning `python3 -c '1+1'` with the same
// interpreter, N times each, interleaved, on the same machine. The ratio of
// the p50s is the figure tracked: a warm kernel should cost at most a fifth
// of a fresh interpreter.
//
// execd runs locally (not in Docker): this measures execd and the kernel,
// not container networking.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/opensandbox-go/opensandbox/bench/internal/benchkit"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func main() {
	execdPath := flag.String("execd", "bin/execd", "path to the execd binary")
	python := flag.String("python", "/usr/bin/python3", "python with ipykernel, used by execd (EXECD_PYTHON) and for the spawn baseline")
	n := flag.Int("n", 50, "runs to time on each side")
	warm := flag.Int("warm", 5, "untimed runs on each side first")
	flag.Parse()
	if err := run(*execdPath, *python, *n, *warm); err != nil {
		fmt.Fprintln(os.Stderr, "code-bench:", err)
		os.Exit(1)
	}
}

func run(execdPath, python string, n, warm int) error {
	base, stop, err := startExecd(execdPath, python)
	if err != nil {
		return err
	}
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	t0 := time.Now()
	ctxID, err := createContext(client, base)
	if err != nil {
		return err
	}
	for range warm { // the first run also starts the kernel
		if _, err := runCode(client, base, ctxID); err != nil {
			return err
		}
		if err := spawn(python); err != nil {
			return err
		}
	}
	fmt.Printf("python context created and warmed in %v\n", time.Since(t0).Round(time.Millisecond))

	kernel := make([]time.Duration, 0, n)
	fresh := make([]time.Duration, 0, n)
	for range n {
		d, err := runCode(client, base, ctxID)
		if err != nil {
			return err
		}
		kernel = append(kernel, d)
		t := time.Now()
		if err := spawn(python); err != nil {
			return err
		}
		fresh = append(fresh, time.Since(t))
	}
	k50, k95 := benchkit.Percentile(kernel, 50), benchkit.Percentile(kernel, 95)
	f50, f95 := benchkit.Percentile(fresh, 50), benchkit.Percentile(fresh, 95)
	r50, r95 := float64(k50)/float64(f50), float64(k95)/float64(f95)
	fmt.Printf("code round trip (1+1, n=%d): warm kernel p50 %s p95 %s | spawn %s -c '1+1' p50 %s p95 %s | ratio p50 %.3f p95 %.3f | target <= 0.2: %s\n",
		n, ms(k50), ms(k95), python, ms(f50), ms(f95), r50, r95, verdict(r50 <= 0.2))
	return nil
}

// startExecd runs execd on a free loopback port with python as its
// interpreter and waits for /ping.
func startExecd(path, python string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(path, "--addr", addr, "--log-level", "3")
	cmd.Env = append(os.Environ(), "EXECD_PYTHON="+python)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start execd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, stop, nil
			}
		}
		select {
		case <-exited:
			return "", nil, errors.New("execd exited during start")
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("execd did not answer /ping: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling /ping, bounded by the deadline
	}
}

func createContext(c *http.Client, base string) (string, error) {
	body, _ := json.Marshal(sandbox.CodeContext{Language: "python"})
	resp, err := c.Post(base+"/code/context", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST /code/context: %d %s", resp.StatusCode, data)
	}
	var cc sandbox.CodeContext
	if err := json.Unmarshal(data, &cc); err != nil || cc.ID == "" {
		return "", fmt.Errorf("POST /code/context: bad reply %s (%v)", data, err)
	}
	return cc.ID, nil
}

// runCode runs 1+1 in context id and returns the time from sending the
// request to the execution_complete event.
func runCode(c *http.Client, base, id string) (time.Duration, error) {
	body, _ := json.Marshal(sandbox.RunCodeRequest{Context: &sandbox.CodeContext{ID: id}, Code: "1+1"})
	t0 := time.Now()
	resp, err := c.Post(base+"/code", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("POST /code: %d %s", resp.StatusCode, data)
	}
	er := sandbox.NewEventReader(resp.Body)
	var got string
	for {
		ev, err := er.Next()
		if err != nil {
			return 0, fmt.Errorf("1+1: stream ended before execution_complete: %w", err)
		}
		switch ev.Type {
		case sandbox.EventResult:
			got, _ = ev.Results["text"].(string)
		case sandbox.EventError:
			return 0, fmt.Errorf("1+1 raised %+v", ev.Error)
		case sandbox.EventExecutionComplete:
			d := time.Since(t0)
			if got != "2" {
				return 0, fmt.Errorf("1+1 gave %q", got)
			}
			io.Copy(io.Discard, resp.Body)
			return d, nil
		}
	}
}

func spawn(python string) error {
	if out, err := exec.Command(python, "-c", "1+1").CombinedOutput(); err != nil {
		return fmt.Errorf("%s -c '1+1': %v %s", python, err, out)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
