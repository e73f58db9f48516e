package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// forwardProc is a running `osb sandbox forward`.
type forwardProc struct {
	cmd    *osexec.Cmd
	url    string
	stderr *bytes.Buffer
	exited chan error
}

// startForward starts osb with args (a `sandbox forward`), waits for the
// line it prints once it listens and returns the local URL from it. The
// process is killed at the end of the test if it still runs.
func (c *cliEnv) startForward(args ...string) *forwardProc {
	c.t.Helper()
	cmd := osexec.Command(c.bin, args...)
	cmd.Env = []string{"HOME=" + c.home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p := &forwardProc{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start osb %s: %v", strings.Join(args, " "), err)
	}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		l, _ := br.ReadString('\n')
		lines <- l
		io.Copy(io.Discard, br)
		p.exited <- cmd.Wait()
	}()
	c.t.Cleanup(func() {
		cmd.Process.Kill() // an error once it has exited
		<-p.exited
	})
	select {
	case line := <-lines:
		f := strings.Fields(line)
		if len(f) != 7 || f[0] != "forwarding" || !strings.HasPrefix(f[1], "http://127.0.0.1:") {
			c.t.Fatalf("osb %s printed %q, want \"forwarding http://127.0.0.1:<port> -> sandbox ...\"; stderr %q", strings.Join(args, " "), line, p.stderr.String())
		}
		p.url = f[1]
	case <-time.After(60 * time.Second):
		c.t.Fatalf("osb %s printed nothing in 60s", strings.Join(args, " "))
	}
	return p
}

// interrupt sends SIGINT and returns the exit code.
func (p *forwardProc) interrupt(t *testing.T) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		if ee, ok := err.(*osexec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("osb sandbox forward: %v", err)
		}
		return 0
	case <-time.After(20 * time.Second):
		t.Fatal("osb sandbox forward did not exit within 20s of SIGINT")
		return -1
	}
}

// wsEchoPy is a WebSocket echo server for short text messages, from
// python's standard library. Like code-server it refuses an upgrade whose
// Origin names another host than X-Forwarded-Host (or Host).
const wsEchoPy = `import base64, hashlib, socketserver, sys
from urllib.parse import urlsplit
class H(socketserver.StreamRequestHandler):
    def handle(self):
        self.rfile.readline()
        hdr = {}
        while True:
            line = self.rfile.readline().decode().strip()
            if not line:
                break
            k, v = line.split(":", 1)
            hdr[k.strip().lower()] = v.strip()
        origin, host = hdr.get("origin"), hdr.get("x-forwarded-host", hdr.get("host"))
        if origin and urlsplit(origin).netloc != host:
            self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        key = hdr["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
        acc = base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()
        self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + "\r\n\r\n").encode())
        while True:
            h = self.rfile.read(2)
            if len(h) < 2:
                return
            op, n = h[0] & 15, h[1] & 127
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                self.wfile.write(b"\x88\x00")
                return
            out = b"echo: " + data
            self.wfile.write(bytes([0x81, len(out)]) + out)
class S(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
S(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`

// TestCLISandboxForward serves a directory with python's http.server
// inside a real sandbox and reads a file from it through `osb sandbox
// forward`, directly and through the server proxy.
func TestCLISandboxForward(t *testing.T) {
	c := newCLI(t)
	id := c.createSandbox()
	content := "forwarded " + rand.Text() + "\n"
	c.ok("", "file", "mkdir", id, "/tmp/www")
	c.ok(content, "file", "write", id, "/tmp/www/hello.txt")
	c.ok("", "command", "run", "-d", id, "--", "cd /tmp/www && exec python3 -m http.server 8000 --bind 0.0.0.0")
	c.ok(wsEchoPy, "file", "write", id, "/tmp/wsecho.py")
	c.ok("", "command", "run", "-d", id, "--", "exec python3 /tmp/wsecho.py 8001")

	for _, mode := range []struct {
		name  string
		extra []string
	}{{"direct", nil}, {"server proxy", []string{"--use-server-proxy"}}} {
		t.Run(mode.name, func(t *testing.T) {
			args := append(append([]string{}, mode.extra...), "sandbox", "forward", id, "-p", "8000")
			fw := c.startForward(args...)

			// The server may still be starting: the forwarder answers 502
			// until it listens.
			var body string
			pollUntil(t, "http.server through the forwarder", 30*time.Second, func() bool {
				resp, err := http.Get(fw.url + "/hello.txt")
				if err != nil {
					t.Fatalf("GET %s/hello.txt: %v", fw.url, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				body = string(b)
				return resp.StatusCode == http.StatusOK
			})
			if body != content {
				t.Errorf("GET %s/hello.txt = %q, want %q", fw.url, body, content)
			}
			resp, err := http.Get(fw.url + "/?C=M;O=A")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), `href="hello.txt"`) {
				t.Errorf("GET %s/ (listing) = %d %q, want 200 linking hello.txt", fw.url, resp.StatusCode, b)
			}
			// http.server has no POST: its 501 comes through as it is.
			resp, err = http.Post(fw.url+"/hello.txt", "text/plain", strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotImplemented {
				t.Errorf("POST %s/hello.txt = %d, want http.server's 501", fw.url, resp.StatusCode)
			}

			// A WebSocket from a page the forwarder served (its Origin) to
			// a server that checks Origin the way code-server does.
			ws := c.startForward(append(append([]string{}, mode.extra...), "sandbox", "forward", id, "-p", "8001")...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			wsURL := "ws" + strings.TrimPrefix(ws.url, "http") + "/ws"
			var conn *websocket.Conn
			pollUntil(t, "the WebSocket echo server through the forwarder", 30*time.Second, func() bool {
				var resp *http.Response
				conn, resp, err = websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {ws.url}}})
				if resp != nil && resp.StatusCode == http.StatusForbidden {
					t.Fatalf("Dial %s with Origin %s: 403 (the forwarder or the server refused)", wsURL, ws.url)
				}
				return err == nil
			})
			if err := conn.Write(ctx, websocket.MessageText, []byte("over ws")); err != nil {
				t.Fatalf("WebSocket write: %v", err)
			}
			if _, msg, err := conn.Read(ctx); err != nil || string(msg) != "echo: over ws" {
				t.Errorf("WebSocket read: %q, %v; want \"echo: over ws\"", msg, err)
			}
			conn.CloseNow()
			if code := ws.interrupt(t); code != 0 {
				t.Errorf("osb sandbox forward -p 8001 after SIGINT: exit %d; stderr %q", code, ws.stderr.String())
			}

			if code := fw.interrupt(t); code != 0 {
				t.Errorf("osb sandbox forward after SIGINT: exit %d, want 0; stderr %q", code, fw.stderr.String())
			}
			if _, err := http.Get(fw.url + "/hello.txt"); err == nil {
				t.Errorf("%s still answers after osb exited", fw.url)
			}
		})
	}
}
