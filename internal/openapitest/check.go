package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// emptyBodyProbe is how much of a body documented as empty is read, when its
// length is unknown, to see whether it is really empty.
const emptyBodyProbe = 4 << 10

// Transport returns a RoundTripper that sends requests through base
// (http.DefaultTransport when nil) and checks every exchange against the
// document, reporting problems with t.Errorf. JSON bodies are read and
// restored before the response is returned; stream bodies are checked as the
// caller reads them (frames still unread when the body is closed early are
// not checked); binary and plain-text bodies are left alone.
func (s *Spec) Transport(t testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{spec: s, t: t, base: base}
}

// TransportUnder is Transport for the API served under the path prefix (for
// example "/proxy/44772", where a Docker endpoint puts execd): requests are
// sent unchanged and matched to the document without the prefix. A request
// outside the prefix is reported.
func (s *Spec) TransportUnder(t testing.TB, prefix string, base http.RoundTripper) http.RoundTripper {
	tr := s.Transport(t, base).(*transport)
	tr.prefix = strings.TrimSuffix(prefix, "/")
	return tr
}

type transport struct {
	spec   *Spec
	t      testing.TB
	base   http.RoundTripper
	prefix string // escaped path prefix the API is served under, or ""
}

// documented is req as the document names it: without the prefix.
func (tr *transport) documented(req *http.Request) (*http.Request, error) {
	if tr.prefix == "" {
		return req, nil
	}
	raw := req.URL.EscapedPath()
	rest, ok := strings.CutPrefix(raw, tr.prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return nil, fmt.Errorf("path %q is not under %s", raw, tr.prefix)
	}
	if rest == "" {
		rest = "/"
	}
	u := *req.URL
	path, err := url.PathUnescape(rest)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", raw, err)
	}
	u.Path, u.RawPath = path, rest
	doc := req.Clone(req.Context())
	doc.URL = &u
	return doc, nil
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method, path := req.Method, req.URL.Path
	doc, routeErr := tr.documented(req)
	var route *routers.Route
	var params map[string]string
	if routeErr == nil {
		route, params, routeErr = tr.spec.findRoute(doc)
	}
	resp, err := tr.base.RoundTrip(req)
	if err != nil {
		if routeErr != nil {
			tr.t.Errorf("openapitest: %s %s -> no response: %v", method, path, routeErr)
		}
		return resp, err
	}
	report := func(err error) {
		tr.t.Errorf("openapitest: %s %s -> %d: %v", method, path, resp.StatusCode, err)
	}
	if routeErr != nil {
		report(routeErr)
		return resp, nil
	}
	resp.Body = tr.spec.check(doc, route, params, resp.StatusCode, resp.Header, resp.Body, resp.ContentLength, report)
	return resp, nil
}

// CheckResponse checks one captured exchange (for example the Code,
// HeaderMap and Body of an httptest.ResponseRecorder) against the document,
// reporting problems with t.Errorf. A stream body is checked frame by frame,
// including that it ends with a complete frame.
func (s *Spec) CheckResponse(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	report := func(err error) {
		t.Helper()
		t.Errorf("openapitest: %s %s -> %d: %v", req.Method, req.URL.Path, status, err)
	}
	route, params, err := s.findRoute(req)
	if err != nil {
		report(err)
		return
	}
	if header == nil {
		header = http.Header{}
	}
	rc := s.check(req, route, params, status, header, io.NopCloser(bytes.NewReader(body)), int64(len(body)), report)
	// Drive stream checking to the end.
	io.Copy(io.Discard, rc)
	rc.Close()
}

// check validates status, headers and (depending on the media type) the body
// of a reply, and returns the body for the caller to read: unchanged, restored
// after being read, or wrapped by a stream checker.
func (s *Spec) check(req *http.Request, route *routers.Route, params map[string]string, status int, header http.Header,
	body io.ReadCloser, contentLength int64, report func(error)) io.ReadCloser {
	op := route.Operation
	if extBool(op.Extensions, extPassthrough) {
		return body
	}
	if status == http.StatusSwitchingProtocols || req.Method == http.MethodHead {
		return body
	}
	respRef := op.Responses.Status(status)
	if respRef == nil {
		respRef = op.Responses.Default()
	}
	if respRef == nil || respRef.Value == nil {
		report(fmt.Errorf("status %d is not documented for %s %s", status, route.Method, route.Path))
		return body
	}
	resp := respRef.Value

	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request:    req,
			PathParams: params,
			Route:      route,
		},
		Status: status,
		Header: header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus:   true,
			ExcludeResponseBody:     true,
			MultiError:              true,
			SchemaValidationOptions: s.schemaOptions(),
		},
	}
	// Status and headers.
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		report(err)
	}

	if len(resp.Content) == 0 {
		return checkEmpty(body, contentLength, report)
	}

	ct := header.Get("Content-Type")
	if ct == "" && extBool(resp.Extensions, extOptionalBody) {
		return checkEmpty(body, contentLength, report)
	}
	mt := resp.Content.Get(ct)
	if mt == nil {
		report(fmt.Errorf("Content-Type %q is not documented for status %d (want one of %s)", ct, status, strings.Join(mediaTypes(resp.Content), ", ")))
		return body
	}
	mediaType, _, _ := mime.ParseMediaType(ct)

	switch {
	case mediaType == "text/event-stream":
		framing, _ := framingOf(mt)
		var schema *openapi3.Schema
		if mt.Schema != nil {
			schema = mt.Schema.Value
		}
		return newStreamChecker(body, schema, framing, s.schemaOptions(), report)

	case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
		data, err := io.ReadAll(body)
		body.Close()
		restored := io.NopCloser(bytes.NewReader(data))
		if err != nil {
			report(fmt.Errorf("reading body: %w", err))
			return restored
		}
		input.Options.ExcludeResponseBody = false
		input.SetBodyBytes(data)
		if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
			report(fmt.Errorf("%w; body: %s", err, snippet(data)))
		}
		return restored

	default:
		// Binary or plain text: status, headers and Content-Type only.
		return body
	}
}

// schemaOptions are the options of every schema check: the document's
// format validators, and short error messages (the caller adds the value).
func (s *Spec) schemaOptions() []openapi3.SchemaValidationOption {
	return append(s.Doc.GetSchemaValidationOptions(), openapi3.DisableSchemaErrorDetails())
}

// mediaTypes lists the documented media types of a response, sorted.
func mediaTypes(c openapi3.Content) []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkEmpty reports a body where the document declares none.
func checkEmpty(body io.ReadCloser, contentLength int64, report func(error)) io.ReadCloser {
	switch {
	case contentLength == 0:
		return body
	case contentLength > 0:
		report(fmt.Errorf("body of %d bytes where the document declares an empty body", contentLength))
		return body
	}
	head, err := io.ReadAll(io.LimitReader(body, emptyBodyProbe))
	if len(head) > 0 {
		report(fmt.Errorf("non-empty body where the document declares an empty body: %q", snippet(head)))
	}
	if err != nil {
		report(fmt.Errorf("reading body: %w", err))
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), body), body}
}

func snippet(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
