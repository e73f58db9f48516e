package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/code"
	"github.com/opensandbox-go/opensandbox/internal/execd/command"
	"github.com/opensandbox-go/opensandbox/internal/execd/files"
	"github.com/opensandbox-go/opensandbox/internal/execd/isolation"
	"github.com/opensandbox-go/opensandbox/internal/execd/metrics"
	"github.com/opensandbox-go/opensandbox/internal/execd/proxy"
	"github.com/opensandbox-go/opensandbox/internal/execd/pty"
	"github.com/opensandbox-go/opensandbox/internal/execd/session"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// serveReal runs execd's API through Serve (the real http.Server with its
// timeouts) with the given read bounds and returns its address.
func serveReal(t *testing.T, header, body time.Duration, step int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := command.New(command.Options{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{
		AccessToken: testToken,
		Commands:    cmds,
		Sessions:    session.New(session.Options{}),
		Code:        code.New(code.Options{}),
		Files:       files.New(files.Options{BaseDir: t.TempDir()}),
		Metrics:     mc,
		PTY:         pty.New(pty.Options{}),
		Isolated:    isolation.New(isolation.Options{}),
		Proxy:       proxy.New(proxy.Options{Host: forwardHost}),

		ReadHeaderTimeout: header,
		BodyReadTimeout:   body,
		BodyProgressBytes: step,
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// trickle sends data one byte per interval on conn while another goroutine
// waits for the server to answer or close; it returns how many bytes were
// sent when the server gave up on the client, and what the server said.
func trickle(t *testing.T, conn net.Conn, data string, interval time.Duration) (sent int, reply string) {
	t.Helper()
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(data); i++ {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			if _, err := conn.Write([]byte{data[i]}); err != nil {
				return
			}
			mu.Lock()
			sent++
			mu.Unlock()
		}
	}()
	conn.SetReadDeadline(time.Now().Add(time.Duration(len(data)+20) * interval))
	b, err := io.ReadAll(conn)
	close(stop)
	wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("reading the reply: %v (got %q)", err, b)
	}
	mu.Lock()
	defer mu.Unlock()
	return sent, string(b)
}

// A body sent one byte at a time is cut off by the body deadline; before,
// nothing bounded it and the connection stayed open as long as the client
// kept trickling.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr := serveReal(t, time.Second, 500*time.Millisecond, 1024)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"command":"echo never","envs":{"PAD":"` + strings.Repeat("x", 60) + `"}}`
	fmt.Fprintf(conn, "POST /command HTTP/1.1\r\nHost: execd\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		sandbox.AccessTokenHeader, testToken, len(body))
	sent, reply := trickle(t, conn, body, 100*time.Millisecond)
	if sent >= len(body) {
		t.Fatalf("the server read all %d bytes of a body sent at 10 B/s; reply %q", sent, reply)
	}
	if strings.Contains(reply, "never") {
		t.Errorf("the command ran: %q", reply)
	}
	t.Logf("cut off after %d of %d bytes: %.80q", sent, len(body), reply)
}

// Headers sent one byte at a time are cut off by ReadHeaderTimeout.
func TestSlowHeadersAreCutOff(t *testing.T) {
	addr := serveReal(t, 500*time.Millisecond, time.Second, 1024)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "GET /ping HTTP/1.1\r\nHost: execd\r\n" + sandbox.AccessTokenHeader + ": " + testToken + "\r\n\r\n"
	sent, reply := trickle(t, conn, head, 100*time.Millisecond)
	if sent >= len(head) {
		t.Fatalf("the server waited for all %d header bytes sent at 10 B/s; reply %q", sent, reply)
	}
}

// slowReader delivers data in chunks with a pause before each: a slow but
// steady upload.
type slowReader struct {
	data  []byte
	chunk int
	pause time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.pause) // the client's pace, not a wait for readiness
	n := copy(p[:min(len(p), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// A body that keeps making progress is read whole however long it takes
// in total, and a reply streamed after the body runs past every deadline.
func TestSteadyBodyAndLongStreamPass(t *testing.T) {
	addr := serveReal(t, time.Second, 400*time.Millisecond, 2048)
	// 16 chunks of 4 KiB, 150 ms apart: 2.4 s in all, six times the body
	// timeout, and the command itself streams for longer than that.
	body := `{"command":"sleep 1; echo done","envs":{"PAD":"` + strings.Repeat("x", 64<<10) + `"}}`
	req, err := http.NewRequestWithContext(testContext(t), "POST", "http://"+addr+"/command",
		&slowReader{data: []byte(body), chunk: 4 << 10, pause: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set(sandbox.AccessTokenHeader, testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var types, out []string
	er := sandbox.NewEventReader(bufio.NewReader(resp.Body))
	for {
		ev, err := er.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v (events so far %v)", err, types)
		}
		types = append(types, ev.Type)
		if ev.Type == sandbox.EventStdout {
			out = append(out, ev.Text)
		}
	}
	if strings.Join(out, "|") != "done" || types[len(types)-1] != sandbox.EventExecutionComplete {
		t.Errorf("events %v stdout %q, want done and execution_complete", types, out)
	}
}
