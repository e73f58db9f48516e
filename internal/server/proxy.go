package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// strippedRequestHeaders never reach a sandbox: the platform's credentials
// and the caller's cookies and execd token (the proxy sets the real token
// itself when the target is execd).
var strippedRequestHeaders = []string{
	sandbox.APIKeyHeader,
	"Authorization",
	"Cookie",
	sandbox.AccessTokenHeader,
}

// sandboxProxy serves /sandboxes/{sandboxId}/proxy/{port}/{path...}: it
// forwards any method, streams bodies both ways without buffering, and
// relays WebSocket upgrades. The target is always the address the runtime
// gives for that sandbox and port; the caller's path cannot leave it.
type sandboxProxy struct {
	s  *Server
	rp *httputil.ReverseProxy
}

// proxyTarget is what ServeHTTP decided for one request; rewrite reads it
// from the request's context.
type proxyTarget struct {
	port    int // the port inside the sandbox
	addr    runtime.Address
	rawPath string // escaped path after {port}, starting with "/"
	token   string // execd's token when the target is execd, else ""
	in      *http.Request
}

type targetKey struct{}

func newSandboxProxy(s *Server) *sandboxProxy {
	p := &sandboxProxy{s: s}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 nil, // sandbox addresses never go through an environment proxy
		DialContext:           dialer.DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Relay encodings untouched rather than negotiating gzip.
		DisableCompression: true,
		// No response timeout: long polls and streams are normal here.
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      transport,
		FlushInterval:  -1,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.fail,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return p
}

func (p *sandboxProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := p.s
	// With OpenProxy the route is open to the world (as upstream), but
	// not to sandboxes: one may have learnt its neighbours' ids from the
	// engine's DNS. Otherwise the route table already checked the key.
	if s.cfg.OpenProxy && s.callers != nil && s.cfg.APIKey != "" && s.callers.fromSandbox(r.Context(), r.RemoteAddr) {
		if err := s.checkAPIKey(r, "a request from inside a sandbox must carry the API key on the proxy route: "); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	id := sandboxID(r)
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rest, err := restAfterPort(r.URL.EscapedPath(), r.Pattern)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	addr, err := s.rt.Address(ctx, id, port)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, runningCodes, subjectSandbox(id)))
		return
	}
	t := proxyTarget{port: port, addr: addr, rawPath: rest, in: r}
	if reachesExecd(port, addr) {
		if t.token, err = s.execdToken(ctx, id); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if isUpgrade(r) {
		// Hijacked connections outlive http.Server.Shutdown; end them
		// when the server's background work ends.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.bg, cancel)
		defer stop()
	}
	// The sandbox may answer before it has read the whole body (execd
	// streams a command's first frame once it has parsed the request).
	// Without full duplex, Go's HTTP/1 server swallows the unread body on
	// the first response write, the copy to the sandbox fails and the
	// reply is cut short.
	r, done := httpmw.FullDuplex(w, r)
	t.in = r
	up := &upstreamTrace{}
	ctx = httptrace.WithClientTrace(context.WithValue(ctx, targetKey{}, t), up.trace())
	func() {
		defer up.logAbort(s.reqLog(r), r)
		p.rp.ServeHTTP(w, r.WithContext(ctx))
	}()
	done()
}

// upstreamTrace records how one proxied request used its connection to
// the sandbox, so a reply cut midway (ReverseProxy aborts the handler)
// is logged with what explains it: whether the request was fully sent
// (a failed send makes the transport close the connection under the
// reply) and whether the connection was a reused idle one.
type upstreamTrace struct {
	mu       sync.Mutex
	reused   bool
	wasIdle  bool
	idleTime time.Duration
	wrote    bool
	writeErr error
}

func (u *upstreamTrace) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			u.mu.Lock()
			u.reused, u.wasIdle, u.idleTime = info.Reused, info.WasIdle, info.IdleTime
			u.mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			u.mu.Lock()
			u.wrote, u.writeErr = true, info.Err
			u.mu.Unlock()
		},
	}
}

// logAbort, deferred, logs the connection's story when the proxy aborts
// the reply, then lets the abort go on.
func (u *upstreamTrace) logAbort(log *slog.Logger, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		u.mu.Lock()
		attrs := []slog.Attr{
			slog.String("path", r.URL.Path),
			slog.Bool("client_gone", r.Context().Err() != nil),
			slog.Bool("conn_reused", u.reused),
			slog.Bool("conn_was_idle", u.wasIdle),
			slog.Duration("conn_idle_time", u.idleTime),
			slog.Bool("request_sent", u.wrote && u.writeErr == nil),
		}
		if u.writeErr != nil {
			attrs = append(attrs, slog.String("request_send_error", u.writeErr.Error()))
		}
		u.mu.Unlock()
		level := slog.LevelWarn
		if r.Context().Err() != nil {
			level = slog.LevelDebug // the client went away first
		}
		log.LogAttrs(r.Context(), level, "proxied reply cut", attrs...)
	}
	panic(v)
}

func (p *sandboxProxy) rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(proxyTarget)
	out := pr.Out
	out.URL.Scheme = "http"
	out.URL.Host = net.JoinHostPort(t.addr.Host, strconv.Itoa(t.addr.Port))
	raw := t.addr.PathPrefix + t.rawPath
	if path, err := url.PathUnescape(raw); err == nil {
		out.URL.Path, out.URL.RawPath = path, raw
	} else {
		out.URL.Path, out.URL.RawPath = raw, ""
	}
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = "" // Host follows the target address
	for _, h := range strippedRequestHeaders {
		out.Header.Del(h)
	}
	if t.token != "" {
		out.Header.Set(sandbox.AccessTokenHeader, t.token)
	}
	// Keep the chain of earlier proxies and add this hop.
	if prior, ok := pr.In.Header["X-Forwarded-For"]; ok {
		out.Header["X-Forwarded-For"] = append([]string(nil), prior...)
	}
	pr.SetXForwarded()
}

// modifyResponse keeps this server's X-Request-ID the only one on the reply.
func (p *sandboxProxy) modifyResponse(resp *http.Response) error {
	resp.Header.Del(sandbox.RequestIDHeader)
	return nil
}

// fail answers a request the sandbox could not serve with 502.
func (p *sandboxProxy) fail(w http.ResponseWriter, out *http.Request, err error) {
	t, _ := out.Context().Value(targetKey{}).(proxyTarget)
	r := t.in
	if r == nil {
		r = out
	}
	if httpmw.BodyUnfinished(r) {
		w.Header().Set("Connection", "close")
	}
	if httpmw.BodyTimedOut(r.Context()) {
		// The transport reports the request's cancellation (the server
		// cancels it when a body read fails); the cause is the client's.
		p.s.writeError(w, r, apierror.BodyTimeout(httpmw.ErrBodyTimeout))
		return
	}
	if errors.Is(err, context.Canceled) && out.Context().Err() != nil {
		p.s.reqLog(r).Debug("proxy request ended by the client", "path", r.URL.Path, "err", err)
		return
	}
	p.s.writeError(w, r, apierror.Wrap(err, http.StatusBadGateway, apierror.CodeBadGateway,
		"cannot reach port %d of sandbox %q", t.port, sandboxID(r)))
}

// restAfterPort returns the escaped path that follows the {port} segment
// of pattern, "/" when nothing does. A segment that decodes to "." or
// ".." (including encoded forms such as %2e%2e or ..%2f) is refused, so
// the forwarded path always stays under the sandbox address.
func restAfterPort(escaped, pattern string) (string, error) {
	_, pat, ok := strings.Cut(pattern, " ")
	if !ok {
		pat = pattern
	}
	skip := 0
	for i, seg := range strings.Split(strings.TrimPrefix(pat, "/"), "/") {
		if seg == "{port}" {
			skip = i + 1
			break
		}
	}
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	if len(segs) <= skip {
		return "/", nil
	}
	for _, seg := range segs[skip:] {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return "", badRequest("path segment %q is not valid percent-encoding", seg)
		}
		for _, part := range strings.FieldsFunc(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
			if part == "." || part == ".." {
				return "", badRequest("the proxied path must not contain . or .. segments")
			}
		}
	}
	return "/" + strings.Join(segs[skip:], "/"), nil
}

func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
