package tlsproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// HostMatcher is an optional capability of an Injector: MayMatch reports
// whether some request with this scheme (https or http) to host and port
// could match a binding, whatever its method and path. With it the proxy
// intercepts only such connections and splices the others to their
// destination untouched. *vault.Store implements it.
type HostMatcher interface {
	MayMatch(scheme, host string, port int) bool
}

// PortMatcher is an optional capability of an Injector: MayMatchPort
// reports whether some binding covers requests with this scheme on this
// port, to any host. When it is false for a connection's port the proxy
// splices the connection at once, without reading its first bytes, so the
// port behaves as it would without the proxy. *vault.Store implements it.
type PortMatcher interface {
	MayMatchPort(scheme string, port int) bool
}

// Limits of reading a ClientHello before deciding. A ClientHello is a few
// hundred bytes to a few KiB (post-quantum key shares, many extensions).
const (
	defaultHelloTimeout = 10 * time.Second
	maxHelloBytes       = 64 << 10
)

// errHelloRead ends the peek handshake once the ClientHello is parsed.
var errHelloRead = errors.New("tlsproxy: client hello read")

var errHelloTooLarge = errors.New("tlsproxy: client hello too large")

// helloRecorder is the connection the peek handshake runs on: reads pass
// through and are recorded (up to maxHelloBytes); writes (the alert the
// aborted handshake sends) are discarded so the client sees nothing.
type helloRecorder struct {
	net.Conn
	buf []byte
}

func (r *helloRecorder) Read(b []byte) (int, error) {
	room := maxHelloBytes - len(r.buf)
	if room <= 0 {
		return 0, errHelloTooLarge
	}
	if len(b) > room {
		b = b[:room]
	}
	n, err := r.Conn.Read(b)
	r.buf = append(r.buf, b[:n]...)
	return n, err
}

func (r *helloRecorder) Write(b []byte) (int, error) { return len(b), nil }

// peekHello reads the client's first flight up to and including its
// ClientHello without answering it. It returns the bytes read and the SNI
// name ("" when the client sent none).
func peekHello(c net.Conn, timeout time.Duration) (recorded []byte, sni string, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, "", err
	}
	rec := &helloRecorder{Conn: c}
	err = tls.Server(rec, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			sni = h.ServerName
			return nil, errHelloRead
		},
	}).Handshake()
	if !errors.Is(err, errHelloRead) {
		if err == nil {
			err = errors.New("handshake completed unexpectedly")
		}
		return nil, "", err
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, "", err
	}
	return rec.buf, sni, nil
}

// replayConn is an intercepted sandbox connection: Read returns the
// recorded ClientHello bytes first, then the rest of the stream. It carries
// the connection's original destination.
type replayConn struct {
	net.Conn
	pending []byte
	dst     *connInfo
}

func (c *replayConn) Read(b []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		if len(c.pending) == 0 {
			c.pending = nil
		}
		return n, nil
	}
	return c.Conn.Read(b)
}

// connQueue is the net.Listener the HTTP server accepts intercepted
// connections from.
type connQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// deliver hands c to the HTTP server; false when the queue is closed (the
// caller still owns c).
func (q *connQueue) deliver(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

// connSet tracks the connections Serve owns (being peeked at or spliced) so
// that they close when Serve's context ends.
type connSet struct {
	mu     sync.Mutex
	closed bool
	m      map[net.Conn]struct{}
}

// add tracks c; false (and c closed) when the set is closed already.
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	if s.m == nil {
		s.m = make(map[net.Conn]struct{})
	}
	s.m[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// closeAll closes every tracked connection, and any added later.
func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.m {
		c.Close()
	}
	clear(s.m)
}

// routeMode is what differs between TLS and plain-HTTP connections: how
// the first bytes are read and the connection handed to the HTTP server.
type routeMode interface {
	// peek reads the first flight and returns it with the host it names
	// (SNI, or Host header), "" when it names none.
	peek(c net.Conn) (recorded []byte, host string, err error)
	// scheme is the binding scheme of the connection's requests.
	scheme() string
	// spliceUnreadable says what to do when peek fails: splice what was
	// read (plain TCP on port 80 that is not HTTP) or close.
	spliceUnreadable() bool
	// serverConn wraps an intercepted connection for the HTTP server.
	serverConn(c *replayConn) net.Conn
}

type tlsMode struct{ p *Proxy }

func (m tlsMode) peek(c net.Conn) ([]byte, string, error) { return peekHello(c, m.p.helloTimeout) }
func (tlsMode) scheme() string                            { return "https" }
func (tlsMode) spliceUnreadable() bool                    { return false }
func (m tlsMode) serverConn(c *replayConn) net.Conn       { return tls.Server(c, m.p.tlsConfig) }

type plainMode struct{ p *Proxy }

func (m plainMode) peek(c net.Conn) ([]byte, string, error) {
	return peekRequest(c, m.p.helloTimeout)
}
func (plainMode) scheme() string                    { return "http" }
func (plainMode) spliceUnreadable() bool            { return true }
func (plainMode) serverConn(c *replayConn) net.Conn { return c }

// peekRequest reads a plain-HTTP connection's first request head without
// answering it and returns the bytes read and its Host (the URL's host for
// an absolute-form target).
func peekRequest(c net.Conn, timeout time.Duration) (recorded []byte, host string, err error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, "", err
	}
	rec := &helloRecorder{Conn: c}
	req, rerr := http.ReadRequest(bufio.NewReaderSize(rec, 4<<10))
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, "", err
	}
	if rerr != nil {
		return rec.buf, "", rerr
	}
	return rec.buf, req.Host, nil
}

// route handles one accepted sandbox connection: it reads the ClientHello
// (or first request head), then hands the connection to the HTTP server
// (intercept) or splices it to its original destination. It returns when
// the connection is handed over or the splice ends.
func (p *Proxy) route(ctx context.Context, raw net.Conn, m routeMode, conns *connSet, q *connQueue) {
	if !conns.add(raw) {
		return
	}
	owned := true
	defer func() {
		conns.remove(raw)
		if owned {
			raw.Close()
		}
	}()
	host, port := p.cfg.OriginalDst(raw)
	if host == "" || port == 0 {
		p.log.Debug("tlsproxy: connection closed: original destination unknown")
		return
	}
	dst := &connInfo{host: host, port: port, addr: net.JoinHostPort(host, strconv.Itoa(port))}
	if isLocal(host, port, raw.LocalAddr()) {
		// A connection made straight to the proxy's own port (the sandbox
		// shares the sidecar's loopback) reports that port as its
		// destination: splicing it would connect the proxy to itself, again
		// and again.
		p.log.Debug("tlsproxy: connection closed: made to the proxy itself", "dest", dst.addr)
		return
	}
	if pm, ok := p.cfg.Injector.(PortMatcher); p.cfg.Injector == nil || ok && !pm.MayMatchPort(m.scheme(), dst.port) {
		p.log.Debug("tlsproxy: connection spliced: no binding for the port", "dest", dst.addr)
		p.splice(ctx, raw, nil, dst, conns)
		return
	}
	hello, sni, err := m.peek(raw)
	if err != nil {
		var ne net.Error
		if m.spliceUnreadable() && (len(hello) > 0 || errors.As(err, &ne) && ne.Timeout()) {
			// Not HTTP, or a server-speaks-first protocol: pass it through.
			p.log.Debug("tlsproxy: connection spliced: no HTTP request head", "dest", dst.addr, "err", err)
			p.splice(ctx, raw, hello, dst, conns)
			return
		}
		p.log.Debug("tlsproxy: connection closed: no TLS ClientHello", "dest", dst.addr, "err", err)
		return
	}
	if !p.intercepts(m.scheme(), sni, dst) {
		p.log.Debug("tlsproxy: connection spliced", "dest", dst.addr, "sni", sni)
		p.splice(ctx, raw, hello, dst, conns)
		return
	}
	p.log.Debug("tlsproxy: connection intercepted", "dest", dst.addr, "sni", sni)
	// Once delivered, the HTTP server owns the connection and closes it
	// when ctx ends.
	conns.remove(raw)
	if q.deliver(m.serverConn(&replayConn{Conn: raw, pending: hello, dst: dst})) {
		owned = false
	}
}

// intercepts reports whether a connection for this SNI name (or, without
// one, this destination IP) must be terminated because a binding could
// match one of its requests.
func (p *Proxy) intercepts(scheme, sni string, dst *connInfo) bool {
	if p.cfg.Injector == nil {
		return false
	}
	hm, ok := p.cfg.Injector.(HostMatcher)
	if !ok {
		return true
	}
	host := normHost(sni)
	if host == "" {
		host = normHost(dst.host)
	}
	return hm.MayMatch(scheme, host, dst.port)
}

// splice connects client to its original destination, sends the recorded
// ClientHello bytes and copies both ways until both directions end or ctx
// ends. Payload is never inspected or logged.
func (p *Proxy) splice(ctx context.Context, client net.Conn, hello []byte, dst *connInfo, conns *connSet) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	up, err := p.dial(dctx, "tcp", dst.addr)
	cancel()
	if err != nil {
		p.log.Debug("tlsproxy: splice: dial failed", "dest", dst.addr, "err", err)
		return
	}
	if !conns.add(up) {
		return
	}
	defer func() {
		conns.remove(up)
		up.Close()
	}()
	if _, err := up.Write(hello); err != nil {
		p.log.Debug("tlsproxy: splice: write failed", "dest", dst.addr, "err", err)
		return
	}
	errc := make(chan error, 1)
	go func() { errc <- pipe(up, client) }()
	err = pipe(client, up)
	if err2 := <-errc; err == nil {
		err = err2
	}
	if err != nil && ctx.Err() == nil {
		p.log.Debug("tlsproxy: splice ended with an error", "dest", dst.addr, "err", err)
	}
}

// pipe copies src to dst, then half-closes dst. On an error it closes both,
// which also ends the copy in the other direction.
func pipe(dst, src net.Conn) error {
	_, err := io.Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			err = cw.CloseWrite()
		} else {
			err = dst.Close()
		}
	}
	if err != nil {
		dst.Close()
		src.Close()
		return err
	}
	return nil
}

// isLocal reports whether host:port is the address local (a connection's
// own end).
func isLocal(host string, port int, local net.Addr) bool {
	la, ok := local.(*net.TCPAddr)
	if !ok || la.Port != port {
		return false
	}
	ip, err := netip.ParseAddr(host)
	lip, ok := netip.AddrFromSlice(la.IP)
	return err == nil && ok && ip.Unmap().WithZone("") == lip.Unmap()
}
