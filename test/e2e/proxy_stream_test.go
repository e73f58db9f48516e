package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// duplexService is a web service for inside a sandbox: on POST it answers
// at once with a first line ("ready"), before it has read the request
// body, then reads the whole body and ends the reply with its size. A
// client that sends the rest of its body only after seeing "ready" (a
// duplex exchange, as an upload with progress or a streamed RPC does)
// needs every hop to relay the body while the reply streams.
const duplexService = `
import http.server, sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"up\n")

    def do_POST(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.chunk(b"ready\n")
        n = int(self.headers["Content-Length"])
        got = 0
        while got < n:
            b = self.rfile.read(min(65536, n - got))
            if not b:
                break
            got += len(b)
        self.chunk(b"received %d\n" % got)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, *args):
        pass

http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// TestServerProxyDuplexStream: through the server proxy route
// (/sandboxes/{id}/proxy/{port}/...) to a real service in a sandbox, a
// reply that starts streaming before the request body has been sent whole
// reaches the client complete, and the body reaches the service whole.
//
// This is the exchange behind the cut proxied streams that made
// TestCompatJSSDK rerun ("ReverseProxy read error during body copy: use of
// closed network connection"): without full duplex on the proxy, Go's
// HTTP/1 server reads (and discards) the rest of the request body when the
// reply's first bytes are written, under the transport that is relaying
// that body; here that stalls the exchange, and with a body already sent it
// made the transport fail its write and close the connection under the
// reply. The client below sends the second half of its body only after it
// has read the reply's first line, so the outcome does not depend on
// timing.
func TestServerProxyDuplexStream(t *testing.T) {
	s := startServer(t, serverOpts{})
	sb := s.create(t, sandbox.CreateSandboxRequest{
		Image:      &sandbox.ImageSpec{URI: ensureBaseImage(t)},
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		Timeout:    ptr[int64](600),
	})
	e := s.execd(t, sb.ID, true)
	const port = 3050
	e.stream(t, "/command", sandbox.RunCommandRequest{
		Command:    fmt.Sprintf("cat > /tmp/duplex.py <<'EOF'\n%s\nEOF\nexec python3 /tmp/duplex.py %d", duplexService, port),
		Background: true,
	})
	base := fmt.Sprintf("%s/sandboxes/%s/proxy/%d", s.base, sb.ID, port)
	poll(t, "the duplex service in the sandbox", func() bool {
		resp, err := getWithKey(base + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && string(b) == "up\n"
	})

	for i := range 3 { // a fresh upstream connection, then reused ones
		if err := duplexExchange(base, 200<<10); err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
	}
}

// duplexExchange posts a body of 2*half bytes to the duplex service at
// base, sending its second half only once the reply's first line
// ("ready") has arrived, and checks that the reply ends with the body's
// full size. It returns once its sending goroutine has ended.
func duplexExchange(base string, half int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/upload", pr)
	if err != nil {
		return err
	}
	req.ContentLength = int64(2 * half)
	req.Header.Set(sandbox.APIKeyHeader, testAPIKey)
	ready := make(chan struct{})
	sent := make(chan struct{}) // closed when the sender has ended
	var sendErr error
	go func() {
		defer close(sent)
		sendErr = func() error {
			if _, err := io.WriteString(pw, strings.Repeat("a", half)); err != nil {
				return err
			}
			select {
			case <-ready:
			case <-ctx.Done():
				return ctx.Err()
			}
			_, err := io.WriteString(pw, strings.Repeat("b", half))
			return err
		}()
		pw.CloseWithError(sendErr)
	}()
	defer func() {
		cancel()
		pr.CloseWithError(context.Canceled) // unblocks a write nobody reads
		<-sent
	}()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (the reply's headers never came while the body was open)", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "ready\n" {
		return fmt.Errorf("first line %q, %v; want ready (streamed before the body was read)", line, err)
	}
	close(ready)
	rest, err := io.ReadAll(br)
	if err != nil {
		return fmt.Errorf("the reply was cut after %q: %w", rest, err)
	}
	if want := fmt.Sprintf("received %d\n", 2*half); string(rest) != want {
		return fmt.Errorf("reply ends %q, want %q", rest, want)
	}
	<-sent // the service got the whole body, so the sender is done
	if sendErr != nil {
		return fmt.Errorf("sending the body: %w", sendErr)
	}
	return nil
}
