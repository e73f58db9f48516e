// Package hostname puts host names into the one form the egress components
// (policy, DNS proxy, vault, TLS proxy) compare them in, so a name written
// "API.Example.com." in a rule and "api.example.com" in a query or a TLS
// handshake are the same host everywhere.
package hostname

import "strings"

// Canonical returns name lower-cased and without the root's trailing dot.
// It does not validate: callers that accept names check them separately.
func Canonical(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}
