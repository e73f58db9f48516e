// Package proxy forwards /proxy/{port}/{rest} requests to a port inside the
// sandbox (127.0.0.1:{port}/{rest}), so services listening on loopback can
// be reached through execd. Plain HTTP, streamed responses and upgraded
// connections (WebSocket) pass through; the target host is fixed and cannot
// be chosen by the caller.
package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// DefaultHost is the address requests are forwarded to when Options.Host is empty.
const DefaultHost = "127.0.0.1"

// Options configure a Proxy. Every field is optional.
type Options struct {
	// Host is the address every request is forwarded to; default 127.0.0.1.
	Host string
	// StripHeaders are request headers removed before forwarding, such as
	// execd's own access token. The lifecycle server's API key
	// (sandbox.APIKeyHeader) is always removed: clients that talk to
	// execd directly may send it along (the official JS SDK does), and it
	// is a credential for the whole platform, never for a service inside
	// one sandbox.
	StripHeaders []string
	// Logger receives diagnostics; default slog.Default().
	Logger *slog.Logger
}

// Proxy is an http.Handler for the routes "/proxy/{port}" and
// "/proxy/{port}/". It is safe for concurrent use and shares one transport
// (and its idle connections) across requests.
type Proxy struct {
	host  string
	strip []string
	log   *slog.Logger
	rp    *httputil.ReverseProxy
}

// target is what ServeHTTP decided for one request; Rewrite reads it from
// the request context.
type target struct {
	port    string
	rawPath string        // escaped form of the forwarded path
	in      *http.Request // as execd received it, for error logs
}

type targetKey struct{}

// New returns a Proxy.
func New(opts Options) *Proxy {
	p := &Proxy{host: opts.Host, log: opts.Logger}
	if p.host == "" {
		p.host = DefaultHost
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.strip = []string{http.CanonicalHeaderKey(sandbox.APIKeyHeader)}
	for _, h := range opts.StripHeaders {
		p.strip = append(p.strip, http.CanonicalHeaderKey(h))
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 nil, // loopback targets never go through an environment proxy
		DialContext:           dialer.DialContext,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Pass encodings through untouched instead of negotiating gzip and
		// decompressing on the way back.
		DisableCompression: true,
		// No ResponseHeaderTimeout or overall timeout: long polls and
		// streams are legitimate uses.
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:       p.rewrite,
		Transport:     transport,
		FlushInterval: -1,
		ErrorHandler:  p.fail,
		ErrorLog:      slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	return p
}

// ServeHTTP validates the port and forwards the request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("port")
	port, err := strconv.ParseUint(raw, 10, 16)
	if err != nil || port == 0 {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidPort, "invalid port %q: want an integer from 1 to 65535", raw))
		return
	}
	t := target{
		port:    strconv.FormatUint(port, 10),
		rawPath: forwardPath(r.URL.EscapedPath(), r.Pattern),
		in:      r,
	}
	// The service may answer before it has read the whole body. Without
	// full duplex, Go's HTTP/1 server swallows the unread body on the
	// first response write and the forwarded request is cut short.
	r, done := httpmw.FullDuplex(w, r)
	t.in = r
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
	done()
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(target)
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = net.JoinHostPort(p.host, t.port)
	// RawPath keeps the caller's exact encoding (e.g. %2F inside a segment).
	// Unescaping fails only for malformed escapes, which net/http rejects
	// before a handler runs.
	if path, err := url.PathUnescape(t.rawPath); err == nil {
		out.URL.Path, out.URL.RawPath = path, t.rawPath
	} else {
		out.URL.Path, out.URL.RawPath = t.rawPath, ""
	}
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = "" // the Host header follows URL.Host, not the caller
	for _, h := range p.strip {
		out.Header.Del(h)
	}
	// Keep the client chain and add this hop; Host and Proto describe the
	// request as execd received it.
	if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
		out.Header["X-Forwarded-For"] = append([]string(nil), prior...)
	}
	pr.SetXForwarded()
}

// fail answers a request the upstream could not serve; out is the
// outbound request, so errors are logged against the inbound one.
func (p *Proxy) fail(w http.ResponseWriter, out *http.Request, err error) {
	t, _ := out.Context().Value(targetKey{}).(target)
	r := t.in
	if r == nil {
		r = out
	}
	if httpmw.BodyUnfinished(r) {
		w.Header().Set("Connection", "close")
	}
	if out.Context().Err() != nil && errors.Is(err, context.Canceled) {
		p.log.DebugContext(r.Context(), "proxy request canceled by client",
			slog.String("path", r.URL.Path), slog.String("port", t.port), slog.Any("err", err))
		return
	}
	apierror.Write(w, r, apierror.Wrap(err, http.StatusBadGateway, apierror.CodeBadGateway,
		"cannot reach port %s in the sandbox", t.port))
}

// forwardPath returns the escaped path to forward: what follows the
// {port} segment of the route pattern, or "/" when nothing does. Working on
// the escaped path keeps encoded slashes and other escapes intact.
func forwardPath(escaped, pattern string) string {
	skip := portSegment(pattern)
	rest := escaped
	for range skip {
		rest = strings.TrimPrefix(rest, "/")
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "/"
		}
		rest = rest[i:]
	}
	if rest == "" {
		return "/"
	}
	return rest
}

// portSegment is the 1-based position of the {port} wildcard in a
// ServeMux pattern such as "GET /proxy/{port}/", or 2 ("/proxy/{port}")
// when the pattern is unknown.
func portSegment(pattern string) int {
	if _, after, ok := strings.Cut(pattern, " "); ok {
		pattern = strings.TrimLeft(after, " \t")
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:] // drop a host
	}
	for i, seg := range strings.Split(strings.TrimPrefix(pattern, "/"), "/") {
		if seg == "{port}" {
			return i + 1
		}
	}
	return 2
}
