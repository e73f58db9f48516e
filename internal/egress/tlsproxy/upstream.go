package tlsproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxUpstreams bounds the pooled origins; past it the pool starts over.
const maxUpstreams = 256

// upstreamKey names one pool of origin connections. A connection is reused
// only for the same original destination and the same verified server name:
// two sandbox connections with one SNI name but different destinations
// (DNS answers, pinned addresses) must never share an origin connection, nor
// may one destination's connection verified for one name carry another
// name's requests. Verification settings are the Proxy's and fixed.
type upstreamKey struct {
	addr       string // original destination ip:port; the only address dialled
	serverName string // SNI sent and name verified (an IP verifies against IP SANs)
}

// upstreams is the ReverseProxy transport: one keep-alive HTTP/1.1
// http.Transport per upstreamKey, each with its own TLS session cache so
// a new connection to a known origin resumes instead of a full handshake.
type upstreams struct {
	roots *x509.CertPool
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)

	mu sync.Mutex
	m  map[upstreamKey]*http.Transport
}

func (u *upstreams) RoundTrip(req *http.Request) (*http.Response, error) {
	f, ok := req.Context().Value(forwardKey{}).(*forward)
	if !ok {
		return nil, errors.New("tlsproxy: request without a forward")
	}
	return u.transport(f.key).RoundTrip(req)
}

func (u *upstreams) transport(k upstreamKey) *http.Transport {
	u.mu.Lock()
	defer u.mu.Unlock()
	if t := u.m[k]; t != nil {
		return t
	}
	if len(u.m) >= maxUpstreams {
		// In-flight requests keep their transport; connections they hand
		// back close after IdleConnTimeout.
		for _, t := range u.m {
			t.CloseIdleConnections()
		}
		clear(u.m)
	}
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return u.dial(ctx, network, k.addr)
		},
		TLSClientConfig: &tls.Config{
			RootCAs:            u.roots,
			ServerName:         k.serverName,
			MinVersion:         tls.VersionTLS12,
			ClientSessionCache: tls.NewLRUClientSessionCache(8),
		},
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1 upstream
		DisableCompression:    true,                                                   // pass Accept-Encoding through untouched
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	u.m[k] = t
	return t
}

// closeIdle closes every idle origin connection.
func (u *upstreams) closeIdle() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range u.m {
		t.CloseIdleConnections()
	}
}
