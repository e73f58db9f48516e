package tlsproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"time"
)

// Pool limits. maxUpstreams bounds the pooled origins; past it the pool
// starts over.
const (
	maxUpstreams     = 256
	maxIdlePerKey    = 64
	idleTimeout      = 90 * time.Second
	dialTimeout      = 10 * time.Second
	handshakeTimeout = 10 * time.Second
)

// upstreamKey names one pool of origin connections. A connection is reused
// only for the same original destination and the same verified server name:
// two sandbox connections with one SNI name but different destinations
// (DNS answers, pinned addresses) must never share an origin connection, nor
// may one destination's connection verified for one name carry another
// name's requests. Verification settings are the Proxy's and fixed.
//
// Plain HTTP keys have no TLS. A byName key's addr is the bound host name
// and port: its connections are dialled to that name's resolved addresses,
// whatever the sandbox dialled.
type upstreamKey struct {
	addr       string // original destination ip:port (or name:port when byName); the only address dialled
	serverName string // SNI sent and name verified (an IP verifies against IP SANs); for plain HTTP the bound host
	plain      bool   // no TLS
	byName     bool   // resolve serverName through Config.Resolve
}

// upConn is one HTTP/1.1 connection to an origin. It is used by one
// request at a time: the handler goroutine writes the request head and
// reads the response; a request body, when there is one, is written by a
// second goroutine that the handler waits for before the connection is
// reused.
type upConn struct {
	key  upstreamKey
	raw  net.Conn
	conn net.Conn       // the stream: a *tls.Conn over raw, or raw for plain HTTP
	cr   countingReader // under br: bytes read from the origin since the request began
	br   *bufio.Reader
	bw   *bufio.Writer
	used bool      // carried a request before (a reused connection may be dead)
	idle time.Time // when it went back to the pool
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r net.Conn
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// abort closes the connection at once (no close_notify): it unblocks a
// concurrent read or write.
func (uc *upConn) abort() { uc.raw.Close() }

// keyPool is the idle connections and the TLS client configuration (with its
// session cache, so a new connection resumes) of one upstreamKey.
type keyPool struct {
	tls  *tls.Config
	idle []*upConn // most recently used last
}

// upstreams dials and pools origin connections.
type upstreams struct {
	roots    *x509.CertPool
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	dialName func(ctx context.Context, host, port string) (net.Conn, error)

	mu      sync.Mutex
	m       map[upstreamKey]*keyPool
	serving int // running Serve calls; with none, returned connections close
}

func newUpstreams(roots *x509.CertPool, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	dialName func(ctx context.Context, host, port string) (net.Conn, error)) *upstreams {
	return &upstreams{roots: roots, dial: dial, dialName: dialName, m: make(map[upstreamKey]*keyPool)}
}

// pool returns k's pool, creating it; u.mu must be held.
func (u *upstreams) pool(k upstreamKey) *keyPool {
	kp := u.m[k]
	if kp != nil {
		return kp
	}
	if len(u.m) >= maxUpstreams {
		// Connections in use are closed when their request ends.
		for _, kp := range u.m {
			closeAll(kp.idle)
		}
		clear(u.m)
	}
	kp = &keyPool{tls: &tls.Config{
		RootCAs:            u.roots,
		ServerName:         k.serverName,
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: tls.NewLRUClientSessionCache(8),
	}}
	u.m[k] = kp
	return kp
}

func closeAll(ucs []*upConn) {
	for _, uc := range ucs {
		uc.conn.Close()
	}
}

// get returns an idle connection for k that still looks alive, or dials a
// new one.
func (u *upstreams) get(ctx context.Context, k upstreamKey) (*upConn, error) {
	now := time.Now()
	for {
		u.mu.Lock()
		kp := u.pool(k)
		n := len(kp.idle)
		if n == 0 {
			cfg := kp.tls
			u.mu.Unlock()
			if k.plain {
				return u.dialPlain(ctx, k)
			}
			return u.dialTLS(ctx, k, cfg)
		}
		uc := kp.idle[n-1]
		kp.idle[n-1] = nil
		kp.idle = kp.idle[:n-1]
		u.mu.Unlock()
		if now.Sub(uc.idle) < idleTimeout && uc.alive() {
			return uc, nil
		}
		uc.conn.Close()
	}
}

func (u *upstreams) dialTLS(ctx context.Context, k upstreamKey, cfg *tls.Config) (*upConn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	raw, err := u.dial(dctx, "tcp", k.addr)
	cancel()
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		raw.Close()
		return nil, err
	}
	return newUpConn(k, raw, tc), nil
}

// dialPlain opens a plain-HTTP origin connection: to the original
// destination, or, for a byName key, to the bound host's addresses.
func (u *upstreams) dialPlain(ctx context.Context, k upstreamKey) (*upConn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var raw net.Conn
	var err error
	if k.byName {
		_, port, _ := net.SplitHostPort(k.addr)
		raw, err = u.dialName(dctx, k.serverName, port)
	} else {
		raw, err = u.dial(dctx, "tcp", k.addr)
	}
	if err != nil {
		return nil, err
	}
	return newUpConn(k, raw, raw), nil
}

func newUpConn(k upstreamKey, raw, conn net.Conn) *upConn {
	uc := &upConn{key: k, raw: raw, conn: conn}
	uc.cr.r = conn
	uc.br = bufio.NewReaderSize(&uc.cr, 4<<10)
	uc.bw = bufio.NewWriterSize(conn, 4<<10)
	return uc
}

// put returns a connection whose last exchange completed cleanly.
func (u *upstreams) put(uc *upConn) {
	uc.used = true
	uc.idle = time.Now()
	u.mu.Lock()
	kp := u.m[uc.key]
	if u.serving == 0 || kp == nil || len(kp.idle) >= maxIdlePerKey {
		u.mu.Unlock()
		uc.conn.Close()
		return
	}
	kp.idle = append(kp.idle, uc)
	u.mu.Unlock()
}

// closeExpired closes connections idle for longer than idleTimeout.
func (u *upstreams) closeExpired() {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, kp := range u.m {
		keep := kp.idle[:0]
		for _, uc := range kp.idle {
			if now.Sub(uc.idle) >= idleTimeout {
				uc.conn.Close()
			} else {
				keep = append(keep, uc)
			}
		}
		clear(kp.idle[len(keep):])
		kp.idle = keep
	}
}

// serve counts a running Serve; the returned func ends it and, after the
// last, closes every idle origin connection.
func (u *upstreams) serve() func() {
	u.mu.Lock()
	u.serving++
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.serving--
		if u.serving > 0 {
			return
		}
		for _, kp := range u.m {
			closeAll(kp.idle)
			kp.idle = nil
		}
	}
}
