package httpmw

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testLimits are short so that the tests run in seconds; the margins
// between them and what the clients do are wide, so a loaded machine
// does not change the outcome.
var testLimits = BodyLimits{Idle: 2 * time.Second, MinRate: 100, Grace: 2 * time.Second}

// echoLen answers 200 with the number of body bytes read, or 408 when the
// body came too slowly.
func echoLen(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if errors.Is(err, ErrBodyTimeout) {
		http.Error(w, "slow body", http.StatusRequestTimeout)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "%d", n)
}

// serve runs h behind BoundBody on a real loopback listener.
func serve(t *testing.T, h http.Handler, lim BodyLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: BoundBody(h, lim), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		hs.Serve(ln)
	}()
	t.Cleanup(func() {
		hs.Close()
		<-done
	})
	return ln.Addr().String()
}

// slowClient writes a POST with the given Content-Length, then the body
// one piece at a time with a pause before each, until the body is sent or
// a write fails; it returns what the server answered, read until the
// server closes the connection (within 60 s, or the test fails). extra
// are more header lines.
func slowClient(t *testing.T, addr string, length int, piece string, pause time.Duration, extra ...string) (reply string, wroteAll bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	head := fmt.Sprintf("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n", length)
	for _, h := range extra {
		head += h + "\r\n"
	}
	if _, err := io.WriteString(c, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		b   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(c)
		got <- result{b, err}
	}()
	sent := 0
	wroteAll = true
	for sent < length {
		select {
		case r := <-got: // the server answered and closed before the end
			if !answered(r.b, r.err) {
				t.Fatalf("reading the reply: %v", r.err)
			}
			return string(r.b), false
		case <-time.After(pause):
		}
		p := piece
		if len(p) > length-sent {
			p = p[:length-sent]
		}
		if _, err := io.WriteString(c, p); err != nil {
			wroteAll = false
			break
		}
		sent += len(p)
	}
	r := <-got
	if !answered(r.b, r.err) {
		t.Fatalf("reading the reply: %v", r.err)
	}
	return string(r.b), wroteAll
}

// answered reports whether a read of the server's reply got one: to its
// end, or cut by a reset after it. A server that answers before the body is
// all in closes with the client's later bytes unread, and the kernel then
// resets the connection; Linux still hands out what had arrived before, so
// a reader that was slow to run sees the reply followed by ECONNRESET.
func answered(b []byte, err error) bool {
	return err == nil || (errors.Is(err, syscall.ECONNRESET) && len(b) > 0)
}

func statusOf(t *testing.T, reply string) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(reply)), nil)
	if err != nil {
		t.Fatalf("reply %q: %v", reply, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A client trickling a byte every 500 ms (the 1000-byte body would take
// over 8 minutes) is cut once its allowance is used up, and its
// connection is closed after the handler's 408.
func TestBoundBodyCutsATrickle(t *testing.T) {
	addr := serve(t, http.HandlerFunc(echoLen), testLimits)
	start := time.Now()
	reply, all := slowClient(t, addr, 1000, "x", 500*time.Millisecond)
	if all {
		t.Fatalf("the whole trickled body was accepted")
	}
	if code, _ := statusOf(t, reply); code != http.StatusRequestTimeout {
		t.Fatalf("reply to a trickled body = %q, want 408", reply)
	}
	t.Logf("trickle cut after %v", time.Since(start).Round(100*time.Millisecond))
}

// A client that sends part of its body and then nothing is cut after
// Idle, even though the rate allowance is far from used up.
func TestBoundBodyCutsAnIdleClient(t *testing.T) {
	lim := BodyLimits{Idle: 2 * time.Second, MinRate: 1, Grace: time.Hour}
	addr := serve(t, http.HandlerFunc(echoLen), lim)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf")
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close the connection of an idle client: %v", err)
	}
	if code, _ := statusOf(t, string(b)); code != http.StatusRequestTimeout {
		t.Fatalf("reply to an idle client = %q, want 408", b)
	}
}

// A steady upload slower than any single limit in total (6 s, three
// times Idle and Grace) but above MinRate (640 B/s against 100) succeeds.
func TestBoundBodyKeepsASteadyUpload(t *testing.T) {
	addr := serve(t, http.HandlerFunc(echoLen), testLimits)
	piece := strings.Repeat("y", 64)
	reply, all := slowClient(t, addr, 64*60, piece, 100*time.Millisecond, "Connection: close")
	if !all {
		t.Fatalf("the steady upload was cut: %q", reply)
	}
	if code, body := statusOf(t, reply); code != http.StatusOK || body != "3840" {
		t.Fatalf("reply to a steady upload = %d %q, want 200 3840", code, body)
	}
}

// A handler that reads slowly (its own pauses add up to twice Grace) is
// not the client's fault: only time spent waiting for the client counts.
func TestBoundBodyIgnoresASlowReader(t *testing.T) {
	slowReader := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 100)
		total := 0
		for {
			n, err := r.Body.Read(buf)
			total += n
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusRequestTimeout)
				return
			}
			time.Sleep(400 * time.Millisecond) // a slow consumer, not a wait for readiness
		}
		fmt.Fprintf(w, "%d", total)
	})
	addr := serve(t, slowReader, testLimits)
	resp, err := http.Post("http://"+addr+"/up", "text/plain", strings.NewReader(strings.Repeat("z", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != "1000" {
		t.Fatalf("slow reader = %d %q, want 200 1000", resp.StatusCode, b)
	}
}

// After the body, a reply streamed for longer than Idle and Grace goes on
// to its end, and the request's context stays alive (the connection's
// background read must not hit a stale deadline).
func TestBoundBodyKeepsALongReply(t *testing.T) {
	streamer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		for i := range 10 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			fmt.Fprintf(w, "tick %d\n", i)
			rc.Flush()
		}
		io.WriteString(w, "end\n")
	})
	addr := serve(t, streamer, testLimits)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/stream", strings.NewReader("body"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.HasSuffix(string(b), "tick 9\nend\n") {
		t.Fatalf("long reply = %q, %v; want 10 ticks and the end", b, err)
	}
}

// Requests without a body, and writers that cannot set deadlines, pass
// through untouched.
func TestBoundBodyPassThrough(t *testing.T) {
	addr := serve(t, http.HandlerFunc(echoLen), testLimits)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "0" {
		t.Fatalf("GET without a body = %d %q", resp.StatusCode, b)
	}
}

// A handler that answers without reading the body (a 401, say) leaves
// net/http to read it before replying; a trickling client is cut there
// too, with that reply.
func TestBoundBodyCutsATrickleNobodyReads(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no key", http.StatusUnauthorized)
	})
	addr := serve(t, refuse, testLimits)
	reply, all := slowClient(t, addr, 1000, "x", 500*time.Millisecond)
	if all {
		t.Fatalf("the whole trickled body was accepted")
	}
	if code, _ := statusOf(t, reply); code != http.StatusUnauthorized {
		t.Fatalf("reply = %q, want the handler's 401", reply)
	}
}
