package proxy

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// routePrefix is the first segment of the routes this package serves.
const routePrefix = "/proxy/"

// Local reports whether r, a request on the route /proxy/{port}/..., is
// for self (the port execd itself listens on) and, if so, returns a copy
// of r re-addressed to execd: every leading /proxy/{self} segment pair is
// removed, so that execd's own handlers serve it in-process. Forwarding it
// instead would cost a second connection to execd, and that hop strips
// execd's own access token. The port segment is read as the forwarding
// proxy reads it (percent-decoded, leading zeros allowed), so no spelling
// of self reaches the network. self 0 means unknown: nothing is local.
func Local(r *http.Request, self int) (*http.Request, bool) {
	if self <= 0 || self > 65535 {
		return r, false
	}
	rest := r.URL.EscapedPath()
	stripped := false
	for {
		after, ok := cutSelf(rest, self)
		if !ok {
			break
		}
		rest, stripped = after, true
	}
	if !stripped {
		return r, false
	}
	if rest == "" {
		rest = "/"
	}
	path, err := url.PathUnescape(rest)
	if err != nil {
		// Not reached: rest is a suffix of a path net/http has decoded.
		return r, false
	}
	local := new(http.Request)
	*local = *r
	u := *r.URL
	u.Path, u.RawPath = path, ""
	if path != rest {
		u.RawPath = rest // keeps escapes such as %2F inside a segment
	}
	local.URL = &u
	return local, true
}

// cutSelf removes one leading "/proxy/{self}" from the escaped path p and
// returns what follows it ("" or a path starting with "/").
func cutSelf(p string, self int) (string, bool) {
	if !strings.HasPrefix(p, routePrefix) {
		return p, false
	}
	seg, after := p[len(routePrefix):], ""
	if i := strings.IndexByte(seg, '/'); i >= 0 {
		seg, after = seg[:i], seg[i:]
	}
	raw, err := url.PathUnescape(seg)
	if err != nil {
		return p, false
	}
	port, err := strconv.ParseUint(raw, 10, 16)
	if err != nil || int(port) != self {
		return p, false
	}
	return after, true
}
