package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// serveReal runs execd's API through Serve (the real http.Server with its
// timeouts) with the given read bounds and returns its address.
func serveReal(t *testing.T, header time.Duration, body httpmw.BodyLimits) string {
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
		BodyLimits:        body,
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

// postCommand opens a connection to addr and sends the head of a
// POST /command declaring a body of length bytes, then start (all or part
// of that body, or nothing); the connection closes with the test.
func postCommand(t *testing.T, addr string, length int, start string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /command HTTP/1.1\r\nHost: execd\r\n%s: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		sandbox.AccessTokenHeader, testToken, length, start); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A body sent one byte at a time is cut off by the body deadline; before,
// nothing bounded it and the connection stayed open as long as the client
// kept trickling.
func TestSlowBodyIsCutOff(t *testing.T) {
	addr := serveReal(t, time.Second, httpmw.BodyLimits{Idle: 500 * time.Millisecond, MinRate: 1024, Grace: 500 * time.Millisecond})
	body := `{"command":"echo never","envs":{"PAD":"` + strings.Repeat("x", 60) + `"}}`
	conn := postCommand(t, addr, len(body), "")
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
	addr := serveReal(t, 500*time.Millisecond, httpmw.BodyLimits{Idle: time.Second, MinRate: 1024, Grace: time.Second})
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
	addr := serveReal(t, time.Second, httpmw.BodyLimits{Idle: 400 * time.Millisecond, MinRate: 4 << 10, Grace: 400 * time.Millisecond})
	// 16 chunks of 4 KiB, 150 ms apart (about 27 KiB/s): 2.4 s in all, six
	// times the idle and grace limits, and the command itself streams for
	// longer than that.
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

// A complete JSON object whose body then stalls before its declared end
// (no EOF ever comes) is timed out: the command does not run, the client
// gets 408 REQUEST_TIMEOUT and the connection is closed, instead of the
// connection being held for as long as the client likes.
func TestJSONBodyWithoutEOFIsTimedOut(t *testing.T) {
	addr := serveReal(t, time.Second, httpmw.BodyLimits{Idle: 300 * time.Millisecond, MinRate: 1024, Grace: 300 * time.Millisecond})
	body := `{"command":"echo never"}`
	conn := postCommand(t, addr, len(body)+16, body)
	// The server must give up on its own: far later than the limits, but
	// well before this deadline.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	reply, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the server held the connection of a stalled body: %v (got %q)", err, reply)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(reply))), nil)
	if err != nil {
		t.Fatalf("reply %q: %v", reply, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "REQUEST_TIMEOUT") {
		t.Errorf("reply %d %q, want 408 REQUEST_TIMEOUT", resp.StatusCode, b)
	}
	if strings.Contains(string(b), "never") {
		t.Errorf("the command ran: %q", b)
	}
}

// An upload that keeps a modest pace runs past every fixed bound of the
// project's default limits (15 s of grace, 30 s idle would cut a trickle
// much sooner): 18 s at 4 KiB/s is read whole and the file lands.
func TestLongSteadyUploadPassesDefaultLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 18 s")
	}
	addr := serveReal(t, time.Second, httpmw.DefaultBodyLimits)
	dest := filepath.Join(t.TempDir(), "long.bin")
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	const chunks, chunk = 18, 4 << 10
	go func() {
		meta, err := mw.CreateFormFile("metadata", "metadata")
		if err == nil {
			_, err = fmt.Fprintf(meta, `{"path":%q}`, dest)
		}
		var part io.Writer
		if err == nil {
			part, err = mw.CreateFormFile("file", "long.bin")
		}
		for i := 0; err == nil && i < chunks; i++ {
			time.Sleep(time.Second) // the client's pace, not a wait for readiness
			_, err = part.Write(bytes.Repeat([]byte{'a' + byte(i)}, chunk))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(testContext(t), "POST", "http://"+addr+"/files/upload", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(sandbox.AccessTokenHeader, testToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload after %v: %d %s", time.Since(start), resp.StatusCode, b)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != chunks*chunk || got[0] != 'a' || got[len(got)-1] != 'a'+chunks-1 {
		t.Errorf("uploaded file has %d bytes (%q...%q), want %d", len(got), got[:1], got[len(got)-1:], chunks*chunk)
	}
	t.Logf("uploaded %d bytes in %v", len(got), time.Since(start))
}
