package tlsproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

// The differential harness puts the proxy's HTTP/1.1 client and the
// standard library's (httputil.ReverseProxy over http.Transport) behind the
// same front end (an http.Server configured as Serve configures it) and in
// front of the same scripted origin, feeds both the same wire bytes, and
// compares what the origin decoded and what the sandbox decoded.

// originReq is one request as the scripted origin decoded it.
type originReq struct {
	Method, URI, Host string
	Header            http.Header
	Body              string
	Trailer           http.Header
	Err               string // the bytes did not decode as a request
}

func (o originReq) String() string {
	return fmt.Sprintf("%s %s host=%q hdr=%v body=%q trailer=%v err=%q", o.Method, o.URI, o.Host, sortedHeader(o.Header), o.Body, sortedHeader(o.Trailer), o.Err)
}

// script answers one decoded request: pre is written before the origin
// reads the body (1xx answers), resp after it; closeAfter ends the
// connection once resp is written.
type script func(r *http.Request) (pre, resp string, closeAfter bool)

// scriptedOrigin is a raw HTTP/1.1 server on loopback: it decodes requests
// with http.ReadRequest and writes whatever its script says, byte for byte.
type scriptedOrigin struct {
	ln     net.Listener
	script atomic.Pointer[script]
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	got   []originReq
	dials int
}

func startScriptedOrigin(tb testing.TB) *scriptedOrigin {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	o := &scriptedOrigin{ln: ln, conns: map[net.Conn]struct{}{}}
	o.wg.Go(o.accept)
	tb.Cleanup(o.close)
	return o
}

func (o *scriptedOrigin) addr() string { return o.ln.Addr().String() }

func (o *scriptedOrigin) set(s script) { o.script.Store(&s) }

func (o *scriptedOrigin) accept() {
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.mu.Lock()
		o.conns[c] = struct{}{}
		o.dials++
		o.mu.Unlock()
		o.wg.Go(func() { o.serve(c) })
	}
}

func (o *scriptedOrigin) close() {
	o.ln.Close()
	o.mu.Lock()
	for c := range o.conns {
		c.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// reset forgets what was received and drops every connection.
func (o *scriptedOrigin) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for c := range o.conns {
		c.Close()
	}
	o.got, o.dials = nil, 0
}

func (o *scriptedOrigin) received() ([]originReq, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.got), o.dials
}

func (o *scriptedOrigin) serve(c net.Conn) {
	defer func() {
		c.Close()
		o.mu.Lock()
		delete(o.conns, c)
		o.mu.Unlock()
	}()
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !isClosed(err) {
				o.record(originReq{Err: err.Error()})
			}
			return
		}
		pre, resp, closeAfter := (*o.script.Load())(req)
		if pre != "" {
			if _, err := io.WriteString(c, pre); err != nil {
				return
			}
		}
		got := originReq{Method: req.Method, URI: req.RequestURI, Host: req.Host, Header: req.Header}
		b, err := io.ReadAll(req.Body)
		got.Body, got.Trailer = string(b), req.Trailer
		if err != nil {
			got.Err = "body: " + err.Error()
			o.record(got)
			return
		}
		o.record(got)
		if _, err := io.WriteString(c, resp); err != nil || closeAfter {
			return
		}
	}
}

func (o *scriptedOrigin) record(r originReq) {
	o.mu.Lock()
	o.got = append(o.got, r)
	o.mu.Unlock()
}

func isClosed(err error) bool {
	var ne net.Error
	return errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && ne.Timeout() || strings.Contains(err.Error(), "connection reset")
}

// frontEnd serves h on loopback as Proxy.serve configures its server.
func frontEnd(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug),
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close(); <-done })
	return ln.Addr().String()
}

// ourPath is the proxy's client (forward) to addr, as plain HTTP without a
// binding, or with plan's headers injected when plan is set.
type ourPath struct {
	p    *Proxy
	key  upstreamKey
	plan *inject.Plan
	end  func()
}

func newOurPath(tb testing.TB, addr string, plan *inject.Plan) *ourPath {
	tb.Helper()
	ca, err := NewCA("diff")
	if err != nil {
		tb.Fatal(err)
	}
	p, err := New(Config{CA: ca, OriginalDst: func(net.Conn) (string, int) { return "", 0 }})
	if err != nil {
		tb.Fatal(err)
	}
	op := &ourPath{p: p, key: upstreamKey{addr: addr, plain: true}, plan: plan, end: p.upstreams.serve()}
	tb.Cleanup(func() { op.end() })
	return op
}

func (op *ourPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := &forward{host: "origin.test", port: 80, key: op.key, plan: op.plan.Clone()}
	op.p.forward(w, r, f)
}

// closeIdle drops the pooled origin connections.
func (op *ourPath) closeIdle() {
	op.end()
	op.end = op.p.upstreams.serve()
}

// stdPath is httputil.ReverseProxy over an http.Transport to addr, set up
// to forward what the proxy forwards (the sandbox's forwarding headers,
// no compression, the same 100-continue wait, no sniffed Content-Type).
func stdPath(addr string, roots *x509.CertPool) (http.Handler, *http.Transport) {
	scheme := "http"
	tr := &http.Transport{
		DisableCompression:    true,
		MaxIdleConnsPerHost:   maxIdlePerKey,
		IdleConnTimeout:       idleTimeout,
		ExpectContinueTimeout: continueTimeout,
	}
	if roots != nil {
		scheme = "https"
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = addr
			pr.Out.Host = pr.In.Host
			for _, k := range forwardingHeaders {
				if v, ok := pr.In.Header[k]; ok {
					pr.Out.Header[k] = v
				}
			}
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
		ErrorLog:     slog.NewLogLogger(slog.DiscardHandler, slog.LevelDebug),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(&noSniff{ResponseWriter: w}, r)
	}), tr
}

// noSniff keeps the server from sniffing a Content-Type for a final answer
// that has none, as the proxy does.
type noSniff struct {
	http.ResponseWriter
	wrote bool
}

func (n *noSniff) WriteHeader(code int) {
	if code >= 200 && !n.wrote {
		n.wrote = true
		if h := n.Header(); h["Content-Type"] == nil {
			h["Content-Type"] = nil
		}
	}
	n.ResponseWriter.WriteHeader(code)
}

func (n *noSniff) Write(b []byte) (int, error) {
	if !n.wrote {
		n.WriteHeader(http.StatusOK)
	}
	return n.ResponseWriter.Write(b)
}

func (n *noSniff) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// sandboxResp is one answer as the sandbox decoded it.
type sandboxResp struct {
	Status  int
	Header  http.Header
	Body    string
	Trailer http.Header
	Err     string
}

func (s sandboxResp) String() string {
	if s.Err != "" {
		return "error: " + s.Err
	}
	return fmt.Sprintf("%d hdr=%v body=%q trailer=%v", s.Status, sortedHeader(s.Header), s.Body, sortedHeader(s.Trailer))
}

// sandboxExchange writes raw on a new connection to addr and reads one
// answer per method (1xx answers are listed too) until the connection ends
// or an answer does not decode.
// seen receives every byte the sandbox read.
func sandboxExchange(addr, raw string, methods []string, seen io.Writer, timeout time.Duration) []sandboxResp {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return []sandboxResp{{Err: "dial: " + err.Error()}}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, raw); err != nil {
		return []sandboxResp{{Err: "write: " + err.Error()}}
	}
	br := bufio.NewReader(io.TeeReader(c, seen))
	var out []sandboxResp
	for _, m := range methods {
		for {
			resp, err := http.ReadResponse(br, &http.Request{Method: m})
			if err != nil {
				if !errors.Is(err, io.EOF) {
					out = append(out, sandboxResp{Err: "head: " + err.Error()})
				}
				return out
			}
			h := resp.Header
			h.Del("Date")
			if resp.StatusCode == http.StatusSwitchingProtocols {
				out = append(out, sandboxResp{Status: resp.StatusCode, Header: h})
				return out
			}
			b, err := io.ReadAll(resp.Body)
			r := sandboxResp{Status: resp.StatusCode, Header: h, Body: string(b), Trailer: resp.Trailer}
			if err != nil {
				r.Err = "body: " + err.Error()
				out = append(out, r)
				return out
			}
			out = append(out, r)
			if resp.StatusCode >= 200 {
				break
			}
		}
	}
	return out
}

func sortedHeader(h http.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fmt.Fprintf(&b, "%s=%q;", k, h[k])
	}
	return b.String()
}

// diffRig is both paths behind their front ends, in front of one scripted
// origin each.
type diffRig struct {
	ourOrigin, stdOrigin *scriptedOrigin
	our                  *ourPath
	stdTr                *http.Transport
	ourAddr, stdAddr     string
	timeout              time.Duration // the sandbox's wait for all answers
}

func newDiffRig(tb testing.TB, plan *inject.Plan) *diffRig {
	tb.Helper()
	d := &diffRig{ourOrigin: startScriptedOrigin(tb), stdOrigin: startScriptedOrigin(tb), timeout: 10 * time.Second}
	d.our = newOurPath(tb, d.ourOrigin.addr(), plan)
	d.ourAddr = frontEnd(tb, d.our)
	rp, tr := stdPath(d.stdOrigin.addr(), nil)
	d.stdTr = tr
	tb.Cleanup(tr.CloseIdleConnections)
	d.stdAddr = frontEnd(tb, rp)
	return d
}

// outcome is what one exchange left at both ends.
type outcome struct {
	origin  []originReq
	dials   int
	sandbox []sandboxResp
	raw     string // the bytes the sandbox read
}

func (d *diffRig) run(s script, raw string, methods []string) (our, std outcome) {
	for _, side := range []struct {
		o    *scriptedOrigin
		addr string
		out  *outcome
	}{{d.ourOrigin, d.ourAddr, &our}, {d.stdOrigin, d.stdAddr, &std}} {
		side.o.reset()
		side.o.set(s)
		var seen strings.Builder
		side.out.sandbox = sandboxExchange(side.addr, raw, methods, &seen, d.timeout)
		side.out.raw = seen.String()
		side.out.origin, side.out.dials = side.o.received()
	}
	d.our.closeIdle()
	d.stdTr.CloseIdleConnections()
	return our, std
}

func fixed(resp string) script {
	return func(*http.Request) (string, string, bool) { return "", resp, false }
}

// closing answers every request with resp and then closes the connection.
func closing(resp string) script {
	return func(*http.Request) (string, string, bool) { return "", resp, true }
}
