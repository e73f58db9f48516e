package vault

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/egress/hostname"
	"github.com/opensandbox-go/opensandbox/internal/egress/inject"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Limits on what a vault may hold.
const (
	maxNameLen     = 128
	maxValueLen    = 8 << 10
	maxItems       = 256 // credentials, and bindings, per vault
	maxListLen     = 64  // entries of each match list
	maxPlaceholder = 256
	maxSubsts      = 16 // substitutions per binding
	defaultScheme  = "https"
)

// schemePorts are the ports each scheme's requests are redirected from
// (and the only ports upstream accepts): a binding's ports follow from its
// schemes.
var schemePorts = map[string]int{"https": 443, "http": 80}

var defaultMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}

// forbiddenHeaders cannot be injected: they frame the message, name the
// destination or are hop-by-hop, so injecting them would change where or how
// the request travels rather than authenticate it.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Proxy-Connection": true, "Upgrade": true, "Te": true,
	"Trailer": true, "Expect": true, "Proxy-Authorization": true, "Proxy-Authenticate": true,
}

// problems collects validation messages; err wraps them all in ErrInvalid.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(p, "; "))
}

// validName reports whether s is a credential or binding name: 1–128 of
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 9110 token (header names, methods).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than HTAB, so a value
// cannot split or smuggle headers.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// checkHeaderName validates an injected header name and returns its
// canonical form.
func checkHeaderName(p *problems, where, name string) string {
	if !isToken(name) {
		p.addf("%s: header name %q is not a valid HTTP token", where, name)
		return ""
	}
	c := http.CanonicalHeaderKey(name)
	if forbiddenHeaders[c] {
		p.addf("%s: header %q cannot be injected", where, c)
		return ""
	}
	return c
}

// validateCredential checks one credential. Messages name the credential,
// never its value.
func validateCredential(p *problems, where string, c Credential) {
	if !validName(c.Name) {
		p.addf("%s: name %q must be 1-%d letters, digits, '.', '_' or '-', starting with a letter or digit", where, c.Name, maxNameLen)
	}
	if c.Source.Type != SourceInline {
		p.addf("%s: source.type %q is not supported (want %q)", where, c.Source.Type, SourceInline)
		return
	}
	switch v := string(c.Source.Value); {
	case v == "":
		p.addf("%s: source.value is required", where)
	case len(v) > maxValueLen:
		p.addf("%s: source.value is longer than %d bytes", where, maxValueLen)
	case !validHeaderValue(v):
		p.addf("%s: source.value contains control characters not allowed in a header value", where)
	}
}

// normalizeHost lower-cases a host pattern, drops a trailing dot and checks it
// is a DNS name, an IP literal or "*." followed by a DNS name.
func normalizeHost(h string) (string, bool) {
	h = hostname.Canonical(strings.TrimSpace(h))
	if h == "" {
		return "", false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String(), true
	}
	name := strings.TrimPrefix(h, "*.")
	if len(name) > 253 || name == "" {
		return "", false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	return h, true
}

// normalizeMatch fills defaults and canonicalises every list.
func normalizeMatch(p *problems, where string, m RequestMatch) RequestMatch {
	var out RequestMatch
	if len(m.Hosts) == 0 {
		p.addf("%s: match.hosts is required", where)
	}
	for _, l := range [][]string{m.Schemes, m.Hosts, m.Methods, m.Paths} {
		if len(l) > maxListLen {
			p.addf("%s: match lists hold at most %d entries", where, maxListLen)
			return out
		}
	}
	if len(m.Ports) > maxListLen {
		p.addf("%s: match lists hold at most %d entries", where, maxListLen)
		return out
	}
	schemes := m.Schemes
	if len(schemes) == 0 {
		schemes = []string{defaultScheme}
	}
	for _, s := range schemes {
		s = strings.ToLower(strings.TrimSpace(s))
		if s != "https" && s != "http" {
			p.addf("%s: match.schemes: %q is not https or http", where, s)
			continue
		}
		out.Schemes = appendUnique(out.Schemes, s)
	}
	// Ports follow from the schemes (https 443, http 80), as upstream
	// derives them; given standard ports are accepted and ignored. Other
	// ports are kept, and the sidecar refuses them (it intercepts 80 and
	// 443 only).
	ports := m.Ports
	if !slices.ContainsFunc(ports, func(n int) bool { return n != 80 && n != 443 }) {
		ports = nil
		for _, s := range out.Schemes {
			ports = append(ports, schemePorts[s])
		}
	}
	for _, n := range ports {
		if n < 1 || n > 65535 {
			p.addf("%s: match.ports: %d is not a TCP port", where, n)
			continue
		}
		if !slices.Contains(out.Ports, n) {
			out.Ports = append(out.Ports, n)
		}
	}
	for _, h := range m.Hosts {
		n, ok := normalizeHost(h)
		if !ok {
			p.addf("%s: match.hosts: %q is not a host name, IP address or *.domain", where, h)
			continue
		}
		out.Hosts = appendUnique(out.Hosts, n)
	}
	methods := m.Methods
	if len(methods) == 0 {
		methods = defaultMethods
	}
	for _, mm := range methods {
		mm = strings.ToUpper(strings.TrimSpace(mm))
		if !isToken(mm) {
			p.addf("%s: match.methods: %q is not an HTTP method", where, mm)
			continue
		}
		out.Methods = appendUnique(out.Methods, mm)
	}
	paths := m.Paths
	if len(paths) == 0 {
		paths = []string{"/*"}
	}
	for _, pp := range paths {
		star := strings.IndexByte(pp, '*')
		switch {
		case !strings.HasPrefix(pp, "/"):
			p.addf("%s: match.paths: %q must start with /", where, pp)
		case star >= 0 && star != len(pp)-1:
			p.addf("%s: match.paths: %q may contain * only as its last character", where, pp)
		case strings.ContainsAny(pp, "?#"):
			p.addf("%s: match.paths: %q must not contain a query or fragment", where, pp)
		default:
			out.Paths = appendUnique(out.Paths, pp)
		}
	}
	return out
}

func appendUnique(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

// injectRef is one header a binding injects: its canonical name, the
// credential whose value it carries and the prefix before that value.
type injectRef struct {
	header, credential, prefix string
}

// validateAuth checks an auth against the known credentials and returns the
// headers it injects.
func validateAuth(p *problems, where string, a Auth, creds map[string]bool) []injectRef {
	credRef := func(field, name string) bool {
		switch {
		case name == "":
			p.addf("%s: %s is required", where, field)
		case !creds[name]:
			p.addf("%s: %s %q references an unknown credential", where, field, name)
		default:
			return true
		}
		return false
	}
	if a.Type != AuthAPIKey && a.Name != "" {
		p.addf("%s: auth.name applies only to type %q", where, AuthAPIKey)
	}
	if a.Type != AuthCustomHeaders && len(a.Headers) > 0 {
		p.addf("%s: auth.headers applies only to type %q", where, AuthCustomHeaders)
	}
	switch a.Type {
	case AuthPassthrough:
		if a.Credential != "" {
			p.addf("%s: auth.credential does not apply to type %q; use substitutions", where, AuthPassthrough)
		}
	case AuthBearer, AuthBasic:
		prefix := "Bearer "
		if a.Type == AuthBasic {
			prefix = "Basic "
		}
		if credRef("auth.credential", a.Credential) {
			return []injectRef{{"Authorization", a.Credential, prefix}}
		}
	case AuthAPIKey:
		if a.Name == "" {
			p.addf("%s: auth.name (the header name) is required for type %q", where, AuthAPIKey)
			credRef("auth.credential", a.Credential)
			return nil
		}
		h := checkHeaderName(p, where+": auth.name", a.Name)
		if credRef("auth.credential", a.Credential) && h != "" {
			return []injectRef{{h, a.Credential, ""}}
		}
	case AuthCustomHeaders:
		if a.Credential != "" {
			p.addf("%s: auth.credential does not apply to type %q; name it per header", where, AuthCustomHeaders)
		}
		if len(a.Headers) == 0 {
			p.addf("%s: auth.headers needs at least one header", where)
			return nil
		}
		var refs []injectRef
		for i, hr := range a.Headers {
			hw := fmt.Sprintf("%s: auth.headers[%d]", where, i)
			h := checkHeaderName(p, hw, hr.Name)
			if h != "" && slices.ContainsFunc(refs, func(r injectRef) bool { return r.header == h }) {
				p.addf("%s: header %q appears twice", hw, h)
				continue
			}
			if credRef(fmt.Sprintf("auth.headers[%d].credential", i), hr.Credential) && h != "" {
				refs = append(refs, injectRef{h, hr.Credential, ""})
			}
		}
		return refs
	case "":
		p.addf("%s: auth.type is required", where)
	default:
		p.addf("%s: auth.type %q is not one of bearer, basic, apiKey, customHeaders, passthrough", where, a.Type)
	}
	return nil
}

// surfaces maps the wire names of substitution surfaces.
var surfaces = map[string]inject.Surface{
	sandbox.CredentialSubstitutionPath:   inject.InPath,
	sandbox.CredentialSubstitutionQuery:  inject.InQuery,
	sandbox.CredentialSubstitutionHeader: inject.InHeader,
	sandbox.CredentialSubstitutionBody:   inject.InBody,
}

// substRef is one validated substitution: the credential it carries.
type substRef struct {
	placeholder, credential string
	in                      inject.Surface
}

// validateSubstitutions checks an auth's substitutions. A placeholder is
// what the sandbox sees and sends in place of the secret: it must be
// printable ASCII and may appear once per binding (it is matched
// literally, case-sensitively).
func validateSubstitutions(p *problems, where string, subs []Substitution, creds map[string]bool) []substRef {
	if len(subs) > maxSubsts {
		p.addf("%s: auth.substitutions holds at most %d entries", where, maxSubsts)
		return nil
	}
	var out []substRef
	for i, s := range subs {
		sw := fmt.Sprintf("%s: auth.substitutions[%d]", where, i)
		ok := true
		switch {
		case s.Placeholder == "":
			p.addf("%s: placeholder is required", sw)
			ok = false
		case len(s.Placeholder) > maxPlaceholder:
			p.addf("%s: placeholder is longer than %d bytes", sw, maxPlaceholder)
			ok = false
		case !printable(s.Placeholder):
			p.addf("%s: placeholder must be printable ASCII without spaces", sw)
			ok = false
		case slices.ContainsFunc(out, func(r substRef) bool { return r.placeholder == s.Placeholder }):
			p.addf("%s: placeholder appears twice in the binding", sw)
			ok = false
		}
		switch {
		case s.Credential == "":
			p.addf("%s: credential is required", sw)
			ok = false
		case !creds[s.Credential]:
			p.addf("%s: credential %q references an unknown credential", sw, s.Credential)
			ok = false
		}
		var in inject.Surface
		if len(s.In) == 0 {
			p.addf("%s: in needs at least one of path, query, header, body", sw)
			ok = false
		}
		for _, name := range s.In {
			sf, known := surfaces[name]
			switch {
			case !known:
				p.addf("%s: in: %q is not one of path, query, header, body", sw, name)
				ok = false
			case in&sf != 0:
				p.addf("%s: in: %q appears twice", sw, name)
				ok = false
			}
			in |= sf
		}
		if ok {
			out = append(out, substRef{placeholder: s.Placeholder, credential: s.Credential, in: in})
		}
	}
	return out
}

// printable reports whether s is visible ASCII (0x21-0x7e): a placeholder
// must survive a header value, a URL and a log line unchanged.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
