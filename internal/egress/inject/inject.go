// Package inject describes what the credential proxy does to one request a
// vault binding matched, and carries it out: headers to set and
// placeholders to replace with secrets in the path, the query, the headers
// or the body. It knows nothing of bindings or of connections; the vault
// builds a Plan and the proxy applies it.
package inject

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// MaxHeadGrowth bounds how much longer substitutions may make each of a
// request's path, query and headers (all values together): placeholders
// are short and secrets may be long, so a sandbox repeating a placeholder
// could otherwise make the proxy build a head of gigabytes.
const MaxHeadGrowth = 256 << 10

// ErrTooLarge is returned when substitutions would grow a part of the
// request head by more than MaxHeadGrowth.
var ErrTooLarge = errors.New("inject: substituted values would grow the request head by more than 256 KiB")

// Surface is a set of request parts where a placeholder is replaced.
type Surface uint8

// Surfaces of a request.
const (
	InPath Surface = 1 << iota
	InQuery
	InHeader
	InBody
)

// Substitution replaces Placeholder with Value (a secret) in the surfaces In.
type Substitution struct {
	Placeholder string
	Value       string
	In          Surface
}

// Plan is what to do to one request that a binding matched.
type Plan struct {
	// Headers are set on the request, replacing any the sandbox sent under
	// the same (canonical) names.
	Headers http.Header
	// Substitutions are applied longest placeholder first.
	Substitutions []Substitution
}

// Clone returns a deep copy: a Plan handed to a request is the request's.
func (p *Plan) Clone() *Plan {
	if p == nil {
		return nil
	}
	return &Plan{Headers: p.Headers.Clone(), Substitutions: slices.Clone(p.Substitutions)}
}

// has reports whether some substitution applies to surface s.
func (p *Plan) has(s Surface) bool {
	return p != nil && slices.ContainsFunc(p.Substitutions, func(sub Substitution) bool { return sub.In&s != 0 })
}

// Secrets are the strings a response must not show: each injected header
// value and, for "Scheme token" values, the token alone; each substituted
// value in every encoding the proxy may have sent it in.
func (p *Plan) Secrets() []string {
	if p == nil {
		return nil
	}
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, vs := range p.Headers {
		for _, v := range vs {
			add(v)
			if _, tok, ok := strings.Cut(v, " "); ok && len(tok) >= 8 {
				add(tok)
			}
		}
	}
	for _, s := range p.Substitutions {
		add(s.Value)
		add(url.PathEscape(s.Value))
		add(url.QueryEscape(s.Value))
		add(jsonEscape(s.Value))
		// An echo of a JSON body as a JSON string (debug endpoints) escapes
		// the escaped value once more.
		add(jsonEscape(jsonEscape(s.Value)))
	}
	return out
}

// pairs returns the (old, new) replacements for surface s: every form the
// placeholder may take there (as written, or percent-encoded by the client)
// and the value encoded for that surface.
func (p *Plan) pairs(s Surface, forms func(string) []string, enc func(string) string) []pair {
	var out []pair
	for _, sub := range p.Substitutions {
		if sub.In&s == 0 {
			continue
		}
		nv := enc(sub.Value)
		for _, f := range forms(sub.Placeholder) {
			if f != "" && !slices.ContainsFunc(out, func(q pair) bool { return q.old == f }) {
				out = append(out, pair{f, nv})
			}
		}
	}
	// Longest first, so a placeholder that contains another wins.
	slices.SortStableFunc(out, func(a, b pair) int { return len(b.old) - len(a.old) })
	return out
}

func literal(s string) []string { return []string{s} }

func identity(s string) string { return s }

// RewritePath replaces placeholders in an escaped path; the value is
// percent-encoded as a path segment, so it can add neither '/' nor '?'.
// It fails with ErrTooLarge past MaxHeadGrowth.
func (p *Plan) RewritePath(escaped string) (string, error) {
	if !p.has(InPath) {
		return escaped, nil
	}
	out, ok := replaceAll(escaped, p.pairs(InPath, func(s string) []string { return []string{s, url.PathEscape(s)} }, url.PathEscape), MaxHeadGrowth)
	if !ok {
		return "", ErrTooLarge
	}
	return out, nil
}

// RewriteQuery replaces placeholders in a raw query; the value is
// query-encoded, so it can add neither '&' nor '='. It fails with
// ErrTooLarge past MaxHeadGrowth.
func (p *Plan) RewriteQuery(raw string) (string, error) {
	if !p.has(InQuery) {
		return raw, nil
	}
	forms := func(s string) []string { return []string{s, url.QueryEscape(s), url.PathEscape(s)} }
	out, ok := replaceAll(raw, p.pairs(InQuery, forms, url.QueryEscape), MaxHeadGrowth)
	if !ok {
		return "", ErrTooLarge
	}
	return out, nil
}

// RewriteHeaders replaces placeholders in the values of h, in place.
// Framing and routing headers are left alone (Host is not in h at all).
// It fails with ErrTooLarge, leaving h partly rewritten, when the values
// together would grow by more than MaxHeadGrowth.
func (p *Plan) RewriteHeaders(h http.Header) error {
	if !p.has(InHeader) {
		return nil
	}
	ps := p.pairs(InHeader, literal, identity)
	budget := MaxHeadGrowth
	for k, vs := range h {
		if k == "Content-Length" || k == "Transfer-Encoding" || k == "Content-Encoding" || k == "Content-Type" {
			continue
		}
		for i, v := range vs {
			nv, ok := replaceAll(v, ps, budget)
			if !ok {
				return ErrTooLarge
			}
			budget -= len(nv) - len(v)
			vs[i] = nv
		}
	}
	return nil
}

// BodyRewriter returns a function that wraps a request body with the
// body's substitutions, or nil when the body is left as it is: no body
// substitution, a compressed body (Content-Encoding other than identity)
// or a multipart one (its parts have their own framing and encodings).
// The value is JSON-escaped in JSON bodies, form-encoded in
// x-www-form-urlencoded ones and written as it is in any other.
func (p *Plan) BodyRewriter(h http.Header) func(io.Reader) io.Reader {
	if !p.has(InBody) {
		return nil
	}
	for _, ce := range h.Values("Content-Encoding") {
		for v := range strings.SplitSeq(ce, ",") {
			if v = strings.TrimSpace(v); v != "" && !strings.EqualFold(v, "identity") {
				return nil
			}
		}
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	var ps []pair
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		return nil
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		ps = p.pairs(InBody, func(s string) []string { return []string{s, jsonEscape(s)} }, jsonEscape)
	case mt == "application/x-www-form-urlencoded":
		ps = p.pairs(InBody, func(s string) []string { return []string{s, url.QueryEscape(s)} }, url.QueryEscape)
	default:
		ps = p.pairs(InBody, literal, identity)
	}
	return func(r io.Reader) io.Reader { return newReplaceReader(r, ps) }
}

// jsonEscape returns s as the inside of a JSON string.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b[1 : len(b)-1])
}
