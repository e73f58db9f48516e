// Package openapitest checks HTTP traffic seen in tests against the project's
// OpenAPI documents (api/*.yaml). It is a test helper: import it only from
// _test.go files.
//
// Load reads and validates a document. Spec.Transport wraps an
// http.RoundTripper so that every exchange of a test client is checked:
// the request must hit a documented path and method, and the reply's status,
// headers and JSON body must match the document. Execution streams
// (text/event-stream) are checked frame by frame while the caller reads them,
// without buffering the whole stream. Spec.CheckResponse does the same check
// for a reply captured with httptest.ResponseRecorder.
//
// Problems are reported with t.Errorf, never t.Fatal, so the transport may be
// used from any goroutine while the test runs.
//
// Routing is done on the URL path alone (the document's servers are
// ignored), so requests to any host, such as an httptest.Server, match.
//
// The checker understands these vendor extensions of the document:
//   - x-stream-framing on a text/event-stream media type: "blank-line" (each
//     JSON frame is one line followed by an empty line; the default) or
//     "line" (one JSON object per line, empty lines ignored);
//   - x-optional-body on a response: an empty body without a Content-Type
//     is accepted even though content is declared;
//   - x-passthrough on an operation: only the route is checked (replies are
//     relayed from another server);
//   - x-rest-of-path on the last path parameter: it matches the remainder of
//     the path, slashes included, and may be empty.
package openapitest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
)

// Extension keys read from the document.
const (
	extFraming      = "x-stream-framing"
	extOptionalBody = "x-optional-body"
	extPassthrough  = "x-passthrough"
	extRestOfPath   = "x-rest-of-path"
)

// Stream framings (values of x-stream-framing).
const (
	framingBlankLine = "blank-line"
	framingLine      = "line"
)

// Spec is a loaded and validated OpenAPI document ready to check traffic.
// It is safe for concurrent use.
type Spec struct {
	// Doc is the parsed document. Do not modify it.
	Doc *openapi3.T
	// Name identifies the document in failure messages.
	Name string

	routes []*route
}

// route is one path template of the document, compiled for matching.
type route struct {
	template string
	item     *openapi3.PathItem
	segs     []segment
	literals int
}

type segment struct {
	literal string // when param is ""
	param   string
	rest    bool // param matches the remainder of the path
}

// RepoPath returns rel resolved against the root of the repository: the
// nearest directory at or above the working directory that holds a go.mod.
// Tests run in their package's directory, so this makes "api/execd.yaml"
// usable from any package. If no go.mod is found, rel is returned unchanged.
func RepoPath(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	dir, err := os.Getwd()
	if err != nil {
		return rel
	}
	for {
		if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
			return filepath.Join(dir, filepath.FromSlash(rel))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return rel
		}
		dir = parent
	}
}

// Load reads the OpenAPI document at path (relative paths are resolved with
// RepoPath), validates it and prepares it for checking. It stops the test
// when the document cannot be loaded or is invalid.
func Load(t testing.TB, path string) *Spec {
	t.Helper()
	s, err := load(path)
	if err != nil {
		t.Fatalf("openapitest: %v", err)
	}
	return s
}

func load(path string) (*Spec, error) {
	full := RepoPath(path)
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	doc, err := loader.LoadFromFile(full)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", full, err)
	}
	ctx := loader.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("validating %s: %w", full, err)
	}
	s := &Spec{Doc: doc, Name: filepath.ToSlash(path)}
	if err := s.compile(); err != nil {
		return nil, fmt.Errorf("%s: %w", full, err)
	}
	return s, nil
}

// compile builds the path matcher and checks the vendor extensions.
func (s *Spec) compile() error {
	if s.Doc.Paths == nil {
		return fmt.Errorf("document has no paths")
	}
	for _, tmpl := range s.Doc.Paths.InMatchingOrder() {
		item := s.Doc.Paths.Value(tmpl)
		r := &route{template: tmpl, item: item}
		parts := strings.Split(strings.TrimPrefix(tmpl, "/"), "/")
		for i, p := range parts {
			if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
				name := p[1 : len(p)-1]
				rest := restOfPath(item, name)
				if rest && i != len(parts)-1 {
					return fmt.Errorf("path %s: %s parameter %q is not the last segment", tmpl, extRestOfPath, name)
				}
				r.segs = append(r.segs, segment{param: name, rest: rest})
				continue
			}
			if strings.ContainsAny(p, "{}") {
				return fmt.Errorf("path %s: partial-segment parameters are not supported", tmpl)
			}
			r.segs = append(r.segs, segment{literal: p})
			r.literals++
		}
		for method, op := range item.Operations() {
			for code, resp := range op.Responses.Map() {
				if resp.Value == nil {
					continue
				}
				for mime, mt := range resp.Value.Content {
					if _, err := framingOf(mt); err != nil {
						return fmt.Errorf("%s %s response %s %s: %w", method, tmpl, code, mime, err)
					}
				}
			}
		}
		s.routes = append(s.routes, r)
	}
	return nil
}

// restOfPath reports whether the path parameter name carries x-rest-of-path
// (on the path item or on any of its operations).
func restOfPath(item *openapi3.PathItem, name string) bool {
	lists := []openapi3.Parameters{item.Parameters}
	for _, op := range item.Operations() {
		lists = append(lists, op.Parameters)
	}
	for _, params := range lists {
		for _, p := range params {
			if p.Value != nil && p.Value.In == openapi3.ParameterInPath && p.Value.Name == name && extBool(p.Value.Extensions, extRestOfPath) {
				return true
			}
		}
	}
	return false
}

func extBool(ext map[string]any, key string) bool {
	b, _ := ext[key].(bool)
	return b
}

// framingOf returns the stream framing of a media type.
func framingOf(mt *openapi3.MediaType) (string, error) {
	if mt == nil {
		return framingBlankLine, nil
	}
	v, ok := mt.Extensions[extFraming]
	if !ok {
		return framingBlankLine, nil
	}
	switch v {
	case framingBlankLine, framingLine:
		return v.(string), nil
	}
	return "", fmt.Errorf("%s: unknown value %v", extFraming, v)
}

// findRoute matches req to an operation of the document by path and method.
func (s *Spec) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	raw := req.URL.EscapedPath()
	if raw == "" {
		raw = "/"
	}
	if !strings.HasPrefix(raw, "/") {
		return nil, nil, fmt.Errorf("path %q is not absolute", raw)
	}
	parts := strings.Split(raw[1:], "/")

	type candidate struct {
		r      *route
		params map[string]string
	}
	var matches []candidate
	for _, r := range s.routes {
		if params, ok := r.match(parts); ok {
			matches = append(matches, candidate{r, params})
		}
	}
	if len(matches) == 0 {
		return nil, nil, fmt.Errorf("path not in %s", s.Name)
	}
	// Most specific first: more literal segments, then fixed length.
	sort.SliceStable(matches, func(i, j int) bool {
		a, b := matches[i].r, matches[j].r
		if a.literals != b.literals {
			return a.literals > b.literals
		}
		return !a.hasRest() && b.hasRest()
	})
	for _, m := range matches {
		if op := m.r.item.GetOperation(req.Method); op != nil {
			return &routers.Route{
				Spec:      s.Doc,
				Path:      m.r.template,
				PathItem:  m.r.item,
				Method:    req.Method,
				Operation: op,
			}, m.params, nil
		}
	}
	return nil, nil, fmt.Errorf("method %s not in %s for path %s", req.Method, s.Name, matches[0].r.template)
}

func (r *route) hasRest() bool {
	return len(r.segs) > 0 && r.segs[len(r.segs)-1].rest
}

// match matches the escaped path segments against the template.
func (r *route) match(parts []string) (map[string]string, bool) {
	params := map[string]string{}
	for i, seg := range r.segs {
		if seg.rest {
			if i > len(parts) {
				return nil, false
			}
			rest := ""
			if i < len(parts) {
				rest = strings.Join(parts[i:], "/")
			}
			v, err := url.PathUnescape(rest)
			if err != nil {
				return nil, false
			}
			params[seg.param] = v
			return params, true
		}
		if i >= len(parts) {
			return nil, false
		}
		v, err := url.PathUnescape(parts[i])
		if err != nil {
			return nil, false
		}
		if seg.param == "" {
			if v != seg.literal {
				return nil, false
			}
			continue
		}
		if v == "" {
			return nil, false
		}
		params[seg.param] = v
	}
	if len(parts) != len(r.segs) {
		return nil, false
	}
	return params, true
}
