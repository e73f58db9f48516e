package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// reservedLabelDomain is the metadata key prefix the platform keeps for
// itself (the runtime stores its own labels under it).
const reservedLabelDomain = "opensandbox.io"

// Limits of Kubernetes-style names.
const (
	maxLabelName = 63  // label name, label value, DNS label
	maxSubdomain = 253 // DNS-1123 subdomain
)

// checkMetadata applies the label rules to every pair of m; field names
// the map in messages (e.g. "metadata").
func checkMetadata(field string, m map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := checkLabel(k, m[k]); err != nil {
			return badRequest("%s: %v", field, err)
		}
	}
	return nil
}

// checkLabel applies the Kubernetes label rules to one metadata pair: a
// key is an optional DNS-subdomain prefix and "/" followed by a name of at
// most 63 characters from [A-Za-z0-9._-] that starts and ends with a
// letter or digit; a value is empty or follows the name rules. Keys under
// opensandbox.io are reserved.
func checkLabel(key, value string) error {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	if hasPrefix {
		if msg := subdomainProblem(prefix); msg != "" {
			return fmt.Errorf("key %q: prefix %s", key, msg)
		}
		if prefix == reservedLabelDomain || strings.HasSuffix(prefix, "."+reservedLabelDomain) {
			return fmt.Errorf("key %q: the prefix %s/ is reserved", key, reservedLabelDomain)
		}
	}
	if name == "" {
		return fmt.Errorf("key %q: the name part is empty", key)
	}
	if msg := labelNameProblem(name); msg != "" {
		return fmt.Errorf("key %q: name %s", key, msg)
	}
	if value != "" {
		if msg := labelNameProblem(value); msg != "" {
			return fmt.Errorf("value %q of key %q %s", value, key, msg)
		}
	}
	return nil
}

// labelNameProblem says what is wrong with a label name or value, or "".
func labelNameProblem(s string) string {
	if len(s) > maxLabelName {
		return fmt.Sprintf("is longer than %d characters", maxLabelName)
	}
	for i := range len(s) {
		c := s[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Sprintf("contains %q; only letters, digits, '-', '_' and '.' are allowed", c)
		}
	}
	if !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return "must start and end with a letter or digit"
	}
	return ""
}

// subdomainProblem says what is wrong with a DNS-1123 subdomain (lower
// case labels joined by dots, at most 253 characters), or "".
func subdomainProblem(s string) string {
	if s == "" {
		return "is empty"
	}
	if len(s) > maxSubdomain {
		return fmt.Sprintf("is longer than %d characters", maxSubdomain)
	}
	for _, label := range strings.Split(s, ".") {
		if msg := dnsLabelProblem(label); msg != "" {
			return fmt.Sprintf("%q: %s", s, msg)
		}
	}
	return ""
}

// dnsLabelProblem says what is wrong with a DNS-1123 label (at most 63
// lower case letters, digits and '-', starting and ending with a letter
// or digit), or "".
func dnsLabelProblem(s string) string {
	if s == "" {
		return "has an empty DNS label"
	}
	if len(s) > maxLabelName {
		return fmt.Sprintf("has a DNS label longer than %d characters", maxLabelName)
	}
	for i := range len(s) {
		c := s[i]
		if !isLowerAlnum(c) && c != '-' {
			return fmt.Sprintf("contains %q; only lower case letters, digits and '-' are allowed", c)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return "must start and end with a lower case letter or digit"
	}
	return ""
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || c >= 'A' && c <= 'Z' }
