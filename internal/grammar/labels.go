package grammar

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ReservedLabelDomain is the label key prefix the platform keeps for
// itself: drivers store their own labels under ReservedLabelDomain + "/",
// so user metadata may not use it or its subdomains.
const ReservedLabelDomain = "opensandbox.io"

// ReservedLabelPrefix is the key prefix of the platform's own labels.
const ReservedLabelPrefix = ReservedLabelDomain + "/"

// CheckLabel applies the Kubernetes label rules to one metadata pair: a
// key is an optional DNS-1123 subdomain prefix and "/" followed by a name
// of at most 63 characters from [A-Za-z0-9._-] that starts and ends with a
// letter or digit; a value is empty or follows the name rules. Keys under
// ReservedLabelDomain are refused. Errors wrap runtime.ErrInvalid.
func CheckLabel(key, value string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return invalid("key %q: %s", key, strings.Join(errs, "; "))
	}
	if IsReservedKey(key) {
		return invalid("key %q: the prefix %s is reserved", key, ReservedLabelPrefix)
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return invalid("value %q of key %q: %s", value, key, strings.Join(errs, "; "))
	}
	return nil
}

// IsReservedKey reports whether a label key lies under ReservedLabelDomain.
func IsReservedKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == ReservedLabelDomain || strings.HasSuffix(prefix, "."+ReservedLabelDomain))
}

// CheckDNSLabel checks a DNS-1123 label (at most 63 lower case letters,
// digits and '-', starting and ending with a letter or digit), such as a
// volume name. Errors wrap runtime.ErrInvalid.
func CheckDNSLabel(s string) error {
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return invalid("%q: %s", s, strings.Join(errs, "; "))
	}
	return nil
}

// CheckDNSSubdomain checks a DNS-1123 subdomain (DNS labels joined by
// dots, at most 253 characters), such as a volume claim name. Errors wrap
// runtime.ErrInvalid.
func CheckDNSSubdomain(s string) error {
	if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
		return invalid("%q: %s", s, strings.Join(errs, "; "))
	}
	return nil
}

// CheckInstanceID checks a server instance id, which scopes a server's
// sandboxes on a shared engine: a DNS-1123 label, so that it fits in a
// label value of every engine and in object names.
func CheckInstanceID(id string) error {
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return invalid("instance id %q: %s", id, strings.Join(errs, "; "))
	}
	return nil
}
