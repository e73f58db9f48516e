package tlsproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
)

// The upstream side is a plain HTTP/1.1 client on the handler's goroutine:
// the request head is written and the response read on the connection the
// request took from the pool, without the per-connection read and write
// goroutines of http.Transport. Only a request body gets a goroutine of its
// own, so the origin can answer while the body still streams (full duplex).

const (
	// flushLatency bounds how long a part of a response of known length
	// may wait in the buffers towards the sandbox while the origin is slow.
	// Bodies of unknown length and event streams are flushed before every
	// read that may block.
	flushLatency = 10 * time.Millisecond
	// continueTimeout is how long a body announced with "Expect:
	// 100-continue" waits for the origin's 100 before it is sent anyway.
	continueTimeout = time.Second
	// bodyWaitBeforeReuse is how long a finished response waits for its
	// request body to be fully written before the connection is given up.
	bodyWaitBeforeReuse = 50 * time.Millisecond
	max1xxResponses     = 5
)

// hopHeaders are removed in both directions (RFC 9110 section 7.6.1), as
// are the headers the Connection header names.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection", // non-standard, still sent by some clients
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// forwardingHeaders are the sandbox's own, passed through as they are: the
// proxy is transparent and adds none.
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

var errNoBody = errors.New("request body not sent: the origin answered before 100 Continue")

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// forward sends r to the origin f names and streams the answer back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, f *forward) {
	ctx := r.Context()
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// A body that breaks its own framing leaves the rest of the
		// connection unparseable. In full-duplex mode the server would
		// read on after it, taking what follows for a new request (a
		// desync): the connection ends with this answer instead.
		tb := &trackedBody{ReadCloser: r.Body}
		r.Body = tb
		f.body = tb
		defer func() {
			if tb.failed.Load() && !f.closing {
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			}
		}()
	}
	upType := upgradeType(r.Header)
	if !isPrint(upType) {
		p.fail(w, r, f, fmt.Errorf("client tried to switch to invalid protocol %q", upType))
		return
	}
	if f.plan != nil {
		f.secrets = f.plan.Secrets()
		if err := f.plan.RewriteHeaders(r.Header); err != nil {
			p.fail(w, r, f, err)
			return
		}
		if err := substituteBody(r, f.plan); err != nil {
			p.fail(w, r, f, err)
			return
		}
	}
	uri, err := requestURI(r.URL, f.plan)
	if err != nil {
		p.fail(w, r, f, err)
		return
	}
	f.uri = uri
	if r.ContentLength != 0 {
		// Let the origin read the rest of the body while it answers (echo
		// and bidirectional streams); ignore servers that cannot.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	var (
		uc   *upConn
		resp *http.Response
		body *bodySender
		stop func() bool
	)
	for attempt := 0; ; attempt++ {
		if uc, err = p.upstreams.get(ctx, f.key); err != nil {
			p.fail(w, r, f, err)
			return
		}
		// The sandbox going away ends the exchange.
		stop = context.AfterFunc(ctx, uc.abort)
		resp, body, err = p.roundTrip(w, r, f, uc, upType)
		if err == nil {
			break
		}
		stop()
		uc.abort()
		// A connection that sat in the pool may have been closed by the
		// origin just as it was taken. Nothing of the answer arrived, and a
		// request without a body whose method is idempotent may be sent
		// again, once, on a new connection; nothing else ever is.
		if attempt == 0 && uc.used && uc.cr.n == 0 && r.ContentLength == 0 && idempotent(r.Method) && ctx.Err() == nil {
			continue
		}
		p.fail(w, r, f, err)
		return
	}
	reuse := false
	defer func() {
		if stop() && reuse {
			p.upstreams.put(uc)
			return
		}
		uc.abort()
		body.end(w)
	}()

	if resp.StatusCode == http.StatusSwitchingProtocols {
		p.switchProtocols(w, r, f, uc, resp, body, upType)
		return
	}

	removeHopByHop(resp.Header)
	needles := f.secrets
	if len(needles) > 0 {
		redactHeader(resp.Header, needles)
	}
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	if _, ok := resp.Header["Content-Type"]; !ok {
		// Present but empty: the server then sends none rather than one
		// it sniffed from the body.
		h["Content-Type"] = nil
	}
	// The declared trailers are announced; those the origin sends
	// undeclared follow with the TrailerPrefix.
	cleanTrailer(resp.Trailer)
	if len(needles) > 0 {
		redactHeader(resp.Trailer, needles) // declared names
	}
	var announced []string
	if len(resp.Trailer) > 0 {
		for k := range resp.Trailer {
			announced = append(announced, k)
		}
		h["Trailer"] = []string{strings.Join(announced, ", ")}
	}
	w.WriteHeader(resp.StatusCode)

	var src io.Reader = resp.Body
	if len(needles) > 0 && resp.Body != http.NoBody {
		rb := newRedactingBody(resp.Body, needles)
		defer rb.free()
		src = rb
	}
	if err := p.copyBody(w, src, uc, resp); err != nil {
		p.log.Debug("tlsproxy: response body copy failed", "method", r.Method, "host", f.host, "port", f.port, "err", f.logged(err))
		// The sandbox must not take a truncated body for a whole one.
		panic(http.ErrAbortHandler)
	}

	cleanTrailer(resp.Trailer)
	if len(resp.Trailer) > 0 {
		redactHeader(resp.Trailer, needles)
		// Force chunking, so net/http does not compute a Content-Length
		// for a short body and drop the trailers.
		w.(http.Flusher).Flush()
		for k, vv := range resp.Trailer {
			if slices.Contains(announced, k) {
				h[k] = vv
			} else {
				h[http.TrailerPrefix+k] = vv
			}
		}
	}
	reuse = !resp.Close && uc.br.Buffered() == 0 && body.wait()
}

// maxRewrittenBody is the largest body whose substitutions are applied in
// memory, so that it keeps an exact Content-Length; a larger body, or one
// of unknown length, streams with its substitutions and goes out chunked.
// maxRewrittenOut bounds the rewritten result held in memory: a short
// placeholder repeated throughout a small body can expand it many times
// over, and such a body streams too.
const (
	maxRewrittenBody = 1 << 20
	maxRewrittenOut  = 2 << 20
)

// substituteBody applies the plan's body substitutions to r's body, when
// it has any and the body is eligible (see inject.Plan.BodyRewriter).
func substituteBody(r *http.Request, plan *inject.Plan) error {
	wrap := plan.BodyRewriter(r.Header)
	if wrap == nil || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > 0 && r.ContentLength <= maxRewrittenBody {
		rewritten := wrap(io.LimitReader(r.Body, r.ContentLength))
		b, err := io.ReadAll(io.LimitReader(rewritten, maxRewrittenOut+1))
		if err != nil {
			// The server's body reader reports a body shorter than its
			// Content-Length as io.ErrUnexpectedEOF.
			return fmt.Errorf("read request body: %w", err)
		}
		if len(b) > maxRewrittenOut {
			// Too large once rewritten: what is read so far, then the rest
			// as it streams.
			r.Body = readCloser{io.MultiReader(bytes.NewReader(b), rewritten), r.Body}
			r.ContentLength = -1
			return nil
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		// The body is in hand (reading it answered the sandbox's 100
		// Continue): the origin need not be asked.
		r.Header.Del("Expect")
		return nil
	}
	r.Body = readCloser{wrap(r.Body), r.Body}
	r.ContentLength = -1
	return nil
}

// trackedBody records whether reading the sandbox's body failed (other than
// by its end or by the proxy closing it).
type trackedBody struct {
	io.ReadCloser
	failed atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, http.ErrBodyReadAfterClose) {
		b.failed.Store(true)
	}
	return n, err
}

// readCloser reads from one reader and closes another (the original body).
type readCloser struct {
	io.Reader
	io.Closer
}

// roundTrip writes the request head, starts the body, and reads the
// response head, forwarding informational responses.
func (p *Proxy) roundTrip(w http.ResponseWriter, r *http.Request, f *forward, uc *upConn, upType string) (*http.Response, *bodySender, error) {
	uc.cr.n = 0
	if err := writeHead(uc.bw, r, f, upType); err != nil {
		return nil, nil, err
	}
	var body *bodySender
	var cont chan bool
	if r.ContentLength != 0 {
		expect := hasToken(r.Header["Expect"], "100-continue")
		if expect || r.ContentLength < 0 {
			// The head goes out at once; a body of known length otherwise
			// shares the first write with it.
			if err := uc.bw.Flush(); err != nil {
				return nil, nil, err
			}
		}
		body = &bodySender{done: make(chan error, 1)}
		if expect {
			cont = make(chan bool, 1)
		}
		go body.run(uc, r, cont)
	} else if err := uc.bw.Flush(); err != nil {
		return nil, nil, err
	}
	for n1xx := 0; ; {
		resp, err := http.ReadResponse(uc.br, r)
		if err != nil {
			if cont != nil {
				cont <- false
			}
			return nil, nil, err
		}
		code := resp.StatusCode
		if code < 100 || code >= 200 || code == http.StatusSwitchingProtocols {
			if cont != nil {
				cont <- false // a final answer first: the body is not sent
			}
			return resp, body, nil
		}
		if n1xx++; n1xx > max1xxResponses {
			return nil, nil, errors.New("too many 1xx informational responses")
		}
		if code == http.StatusContinue {
			if cont != nil {
				cont <- true
				cont = nil
			}
			continue
		}
		removeHopByHop(resp.Header)
		h := w.Header()
		for k, vv := range resp.Header {
			h[k] = vv
		}
		if f.injected() {
			redactHeader(h, f.secrets)
		}
		w.WriteHeader(code)
		clear(h)
	}
}

// writeHead writes the request line and headers: the sandbox's headers less
// hop-by-hop ones, the injected ones in place of the sandbox's, and the
// framing of the body as the proxy sends it.
func writeHead(bw *bufio.Writer, r *http.Request, f *forward, upType string) error {
	var set http.Header
	if f.plan != nil {
		set = f.plan.Headers
	}
	for k, vv := range set {
		if !validFieldName(k) {
			return fmt.Errorf("injected header name %q is invalid", k)
		}
		for _, v := range vv {
			if !validFieldValue(v) {
				return fmt.Errorf("injected header %s has an invalid value", k)
			}
		}
	}
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(f.uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(r.Host)
	bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if _, ok := set[k]; ok || isHopHeader(k) || k == "Content-Length" {
			continue
		}
		if f.injected() && k == "Accept-Encoding" {
			continue // an identity-encoded answer can be scanned for echoed secrets
		}
		if len(conn) > 0 && namedIn(conn, k) && !isForwardingHeader(k) {
			continue
		}
		writeHeaderLines(bw, k, vv)
	}
	for k, vv := range set {
		writeHeaderLines(bw, k, vv)
	}
	if hasToken(r.Header["Te"], "trailers") {
		bw.WriteString("Te: trailers\r\n")
	}
	if upType != "" {
		bw.WriteString("Connection: Upgrade\r\nUpgrade: ")
		bw.WriteString(upType)
		bw.WriteString("\r\n")
	}
	switch {
	case r.ContentLength > 0:
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.FormatInt(r.ContentLength, 10))
		bw.WriteString("\r\n")
	case r.ContentLength < 0:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
		if len(r.Trailer) > 0 {
			keys := make([]string, 0, len(r.Trailer))
			for k := range r.Trailer {
				if !validFieldName(k) {
					// The server takes any declaration; an origin must
					// not get one it cannot parse (http.Transport refuses
					// it too).
					return fmt.Errorf("request declares trailer %q, not a valid field name", k)
				}
				if !framingField(k) {
					keys = append(keys, k)
				}
			}
			if len(keys) > 0 {
				bw.WriteString("Trailer: ")
				bw.WriteString(strings.Join(keys, ","))
				bw.WriteString("\r\n")
			}
		}
	case r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH":
		bw.WriteString("Content-Length: 0\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// requestURI is the request target sent to the origin: the sandbox's, with
// an ambiguous query re-encoded and the plan's path and query placeholders
// replaced.
func requestURI(u *url.URL, plan *inject.Plan) (string, error) {
	q := cleanQuery(u.RawQuery)
	if u.Opaque != "" {
		if q == u.RawQuery {
			return u.RequestURI(), nil
		}
		v := *u
		v.RawQuery = q
		return v.RequestURI(), nil
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	path, err := plan.RewritePath(path)
	if err != nil {
		return "", err
	}
	if q, err = plan.RewriteQuery(q); err != nil {
		return "", err
	}
	if u.ForceQuery || q != "" {
		path += "?" + q
	}
	return path, nil
}

func writeHeaderLines(bw *bufio.Writer, k string, vv []string) {
	for _, v := range vv {
		bw.WriteString(k)
		bw.WriteString(": ")
		bw.WriteString(v)
		bw.WriteString("\r\n")
	}
}

// bodySender writes the request body to the origin on its own goroutine.
type bodySender struct {
	done chan error
	err  error
	got  bool
}

func (b *bodySender) run(uc *upConn, r *http.Request, cont <-chan bool) {
	err := b.send(uc, r, cont)
	if err != nil && err != errNoBody {
		uc.abort() // the origin waits for a body that will not come
	}
	b.done <- err
}

func (b *bodySender) send(uc *upConn, r *http.Request, cont <-chan bool) error {
	if cont != nil {
		t := time.NewTimer(continueTimeout)
		select {
		case ok := <-cont:
			if !ok {
				t.Stop()
				return errNoBody
			}
		case <-t.C:
		}
		t.Stop()
	}
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	chunked := r.ContentLength < 0
	var sent int64
	for {
		n, rerr := r.Body.Read(buf)
		if n > 0 {
			if !chunked && sent+int64(n) > r.ContentLength {
				return errors.New("request body longer than its Content-Length")
			}
			sent += int64(n)
			if chunked {
				uc.bw.WriteString(strconv.FormatInt(int64(n), 16))
				uc.bw.WriteString("\r\n")
			}
			uc.bw.Write(buf[:n])
			if chunked {
				uc.bw.WriteString("\r\n")
			}
			if err := uc.bw.Flush(); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if !chunked {
		if sent != r.ContentLength {
			return io.ErrUnexpectedEOF
		}
		return nil
	}
	uc.bw.WriteString("0\r\n")
	// The trailers are complete now: the server fills r.Trailer at the
	// body's end, with fields the sandbox declared or not.
	cleanTrailer(r.Trailer)
	for k, vv := range r.Trailer {
		writeHeaderLines(uc.bw, k, vv)
	}
	uc.bw.WriteString("\r\n")
	return uc.bw.Flush()
}

// wait reports whether the whole body was sent, waiting briefly for it; a
// nil bodySender (no body) was.
func (b *bodySender) wait() bool {
	if b == nil {
		return true
	}
	if !b.got {
		select {
		case b.err = <-b.done:
		default:
			t := time.NewTimer(bodyWaitBeforeReuse)
			select {
			case b.err = <-b.done:
			case <-t.C:
				t.Stop()
				return false
			}
			t.Stop()
		}
		b.got = true
	}
	return b.err == nil
}

// end stops the body goroutine, if it still runs, and waits for it, so that
// it ends with its request: the origin connection is closed by then (its
// writes fail), and a read deadline in the past fails its reads of the
// sandbox's body. A body cut short leaves the sandbox connection unusable
// for another request, so net/http closes it after the answer.
func (b *bodySender) end(w http.ResponseWriter) {
	if b == nil || b.got {
		return
	}
	select {
	case b.err = <-b.done:
	default:
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
		b.err = <-b.done
	}
	b.got = true
}

// copyBody streams the response body to the sandbox. Nothing written waits
// unflushed while the origin is slow: bodies of unknown length and event
// streams are flushed before any read that may block, other bodies at most
// flushLatency after their first unflushed byte.
func (p *Proxy) copyBody(w http.ResponseWriter, src io.Reader, uc *upConn, resp *http.Response) error {
	if resp.Body == http.NoBody {
		return nil
	}
	fl := w.(http.Flusher)
	eager := resp.ContentLength < 0 || isEventStream(resp.Header["Content-Type"])
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	unflushed := true // the head
	deadline := false
	defer func() {
		if deadline {
			uc.raw.SetReadDeadline(time.Time{})
		}
	}()
	for {
		if unflushed && uc.br.Buffered() == 0 {
			if eager {
				fl.Flush()
				unflushed = false
			} else if !deadline {
				uc.raw.SetReadDeadline(time.Now().Add(flushLatency))
				deadline = true
			}
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			unflushed = true
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var ne net.Error
			if deadline && errors.As(err, &ne) && ne.Timeout() {
				fl.Flush()
				unflushed = false
				uc.raw.SetReadDeadline(time.Time{})
				deadline = false
				continue
			}
			return err
		}
	}
}

// switchProtocols completes a 101 answer: it hands the sandbox connection
// to the origin connection and copies both ways until they end. Requests
// that carry injected credentials are refused a protocol switch: what flows
// after it could not be scanned for the secrets.
func (p *Proxy) switchProtocols(w http.ResponseWriter, r *http.Request, f *forward, uc *upConn, resp *http.Response, body *bodySender, upType string) {
	if f.injected() {
		p.fail(w, r, f, errors.New("protocol switch on a request with injected credentials"))
		return
	}
	resUpType := upgradeType(resp.Header)
	if !isPrint(resUpType) {
		p.fail(w, r, f, fmt.Errorf("backend tried to switch to invalid protocol %q", resUpType))
		return
	}
	if !strings.EqualFold(upType, resUpType) {
		p.fail(w, r, f, fmt.Errorf("backend tried to switch protocol %q when %q was requested", resUpType, upType))
		return
	}
	if body != nil {
		body.err, body.got = <-body.done, true
		if body.err != nil {
			p.fail(w, r, f, body.err)
			return
		}
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.fail(w, r, f, fmt.Errorf("hijack on protocol switch: %w", err))
		return
	}
	defer conn.Close()
	// The server does not track a hijacked connection: close it when the
	// proxy stops (the origin's is aborted then too).
	defer context.AfterFunc(r.Context(), func() { conn.Close() })()
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	resp.Header = h
	resp.Body = nil
	if err := resp.Write(brw); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	errc := make(chan error, 2)
	go func() { // origin to sandbox, then end the sandbox's read side
		_, err := io.Copy(conn, uc.br)
		if err == nil {
			if cw, ok := conn.(interface{ CloseWrite() error }); ok {
				err = cw.CloseWrite()
			} else {
				err = io.EOF
			}
		}
		errc <- err
	}()
	go func() { // sandbox to origin: first what the server read ahead
		var err error
		if n := brw.Reader.Buffered(); n > 0 {
			b, _ := brw.Reader.Peek(n)
			_, err = uc.conn.Write(b)
		}
		if err == nil {
			_, err = io.Copy(uc.conn, conn)
		}
		if err == nil {
			err = io.EOF
		}
		errc <- err
	}()
	// The first copy to end with an error (or the sandbox's end of
	// stream) ends the tunnel: both connections close, which ends the
	// other copy, and it is waited for.
	if err := <-errc; err != nil {
		conn.Close()
		uc.abort()
	}
	<-errc
}

func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, f *forward, err error) {
	p.log.Warn("tlsproxy: upstream request failed", "method", r.Method, "host", f.host, "port", f.port, "injected", f.injected(), "err", f.logged(err))
	if r.Context().Err() != nil {
		return // the sandbox went away
	}
	if f.body != nil && f.body.failed.Load() {
		w.Header().Set("Connection", "close") // see forward
		f.closing = true
	}
	w.WriteHeader(http.StatusBadGateway)
}

// logged is err's text for a log line, with the request's secrets masked:
// an error can quote what the origin sent (a malformed status line that
// echoes the request target, say).
func (f *forward) logged(err error) string {
	msg := err.Error()
	// Longest first: a secret inside another must not leave the rest of it.
	secrets := slices.SortedFunc(slices.Values(f.secrets), func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "[REDACTED]")
	}
	for _, s := range secrets {
		// Quoted by %q, a secret's special characters are escaped.
		if q := strconv.Quote(s); len(q) > 2 {
			msg = strings.ReplaceAll(msg, q[1:len(q)-1], "[REDACTED]")
		}
	}
	return msg
}

// redactHeader replaces every value that contains a secret and drops every
// field whose name contains one: names reach the sandbox in canonical case,
// so a name is compared without regard to case.
func redactHeader(h http.Header, needles []string) {
	for k, vs := range h {
		if nameHolds(k, needles) {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			for _, n := range needles {
				if n != "" && strings.Contains(v, n) {
					vs[i] = "[REDACTED]"
					break
				}
			}
		}
	}
}

func nameHolds(k string, needles []string) bool {
	for _, n := range needles {
		if n != "" && len(n) <= len(k) && strings.Contains(strings.ToLower(k), strings.ToLower(n)) {
			return true
		}
	}
	return false
}

func removeHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
	for _, f := range hopHeaders {
		delete(h, f)
	}
}

// cleanTrailer drops the trailer fields that frame, route or belong to one
// hop (RFC 9110 section 6.5.1 forbids them there): a recipient that merges
// trailers into the header section must not be steered by them.
func cleanTrailer(t http.Header) {
	if len(t) == 0 {
		return
	}
	removeHopByHop(t)
	delete(t, "Content-Length")
	delete(t, "Host")
}

// framingField reports whether the canonical field name k may not be a
// trailer (see cleanTrailer).
func framingField(k string) bool { return isHopHeader(k) || k == "Content-Length" || k == "Host" }

func isHopHeader(k string) bool { return slices.Contains(hopHeaders, k) }

func isForwardingHeader(k string) bool { return slices.Contains(forwardingHeaders, k) }

// namedIn reports whether the Connection header values name the
// (canonical) header k.
func namedIn(conn []string, k string) bool {
	for _, f := range conn {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" && textproto.CanonicalMIMEHeaderKey(sf) == k {
				return true
			}
		}
	}
	return false
}

// hasToken reports whether the comma-separated values hold token
// (case-insensitive).
func hasToken(vv []string, token string) bool {
	for _, v := range vv {
		for sf := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(sf), token) {
				return true
			}
		}
	}
	return false
}

func upgradeType(h http.Header) string {
	if !hasToken(h["Connection"], "upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

func isPrint(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func idempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE":
		return true
	}
	return false
}

func isEventStream(ct []string) bool {
	if len(ct) == 0 || !strings.Contains(strings.ToLower(ct[0]), "event-stream") {
		return false
	}
	mt, _, _ := mime.ParseMediaType(ct[0])
	return mt == "text/event-stream"
}

func validFieldName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// cleanQuery drops query parameters an origin might parse differently (as
// httputil.ReverseProxy does): a query with semicolons or bad escapes is
// re-encoded from what net/url understands of it.
func cleanQuery(s string) string {
	reencode := func(s string) string {
		v, _ := url.ParseQuery(s)
		return v.Encode()
	}
	if strings.Count(s, "&")+1 > 10000 {
		return reencode(s)
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case ';':
			return reencode(s)
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return reencode(s)
			}
			i += 3
		default:
			i++
		}
	}
	return s
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
