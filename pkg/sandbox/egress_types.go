package sandbox

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Wire types of the egress sidecar's API (port EgressPort, token header
// EgressAuthHeader). The policy routes exchange NetworkPolicy and
// NetworkRule, defined with the lifecycle types.

// Derived policy modes reported in PolicyStatus.Mode.
const (
	EgressModeAllowAll  = "allow_all" // default allow and no rules
	EgressModeDenyAll   = "deny_all"  // default deny and no rules
	EgressModeEnforcing = "enforcing" // at least one rule
)

// Enforcement backends reported in PolicyStatus.EnforcementMode.
const (
	EgressEnforcementDNS    = "dns"     // DNS filtering only; IP/CIDR rules not enforced
	EgressEnforcementDNSNft = "dns+nft" // DNS filtering plus nftables
)

// PolicyStatus is the reply of every /policy route.
type PolicyStatus struct {
	Status          string         `json:"status"` // "ok"
	Mode            string         `json:"mode"`
	EnforcementMode string         `json:"enforcementMode"`
	Reason          string         `json:"reason,omitempty"` // extra context, e.g. why enforcement is off
	Policy          *NetworkPolicy `json:"policy,omitempty"`
}

// Redacted is what a Secret prints, formats and logs as.
const Redacted = "[REDACTED]"

// Secret is a credential value. It is a string underneath and marshals to
// JSON as that string, because the SDK must send it to the sidecar; but
// String, GoString, every fmt verb and slog print "[REDACTED]", so a stray
// %v, %d or log call cannot leak it. Convert with string(s) to read it.
//
// Redaction covers the value itself and structs holding it when printed
// with fmt or a slog text handler. encoding/json (including slog's JSON
// handler on a struct that holds a Secret) sees the real value; the types
// that carry one (Credential and the vault requests) implement
// slog.LogValuer so that logging them is safe too. The sidecar never puts
// a Credential in a reply: it answers with metadata views only.
type Secret string

// String implements fmt.Stringer.
func (Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return Redacted }

// Format implements fmt.Formatter for every verb, width and flag.
func (Secret) Format(f fmt.State, _ rune) { f.Write([]byte(Redacted)) }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// UnmarshalJSON implements json.Unmarshaler. It reads a JSON string, as
// the default decoding would, but a type error names the JSON type
// ("string") rather than this Go type.
func (s *Secret) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Secret(v)
	return nil
}

// CredentialSourceInline is the only credential source type today: the
// value travels in the request body.
const CredentialSourceInline = "inline"

// Credential is a secret held by the sidecar's credential vault. Its value
// is write-only: the API never returns it.
type Credential struct {
	Name   string           `json:"name"`
	Source CredentialSource `json:"source"`
}

// LogValue implements slog.LogValuer: the name and source type, no value.
func (c Credential) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", c.Name), slog.String("sourceType", c.Source.Type))
}

// CredentialSource says where a credential's value comes from. Type is
// CredentialSourceInline and Value is the secret itself (required for
// inline; never returned by the sidecar).
type CredentialSource struct {
	Type  string `json:"type"`
	Value Secret `json:"value,omitempty"`
}

// LogValue implements slog.LogValuer: the type, no value.
func (s CredentialSource) LogValue() slog.Value {
	return slog.GroupValue(slog.String("type", s.Type))
}

// CredentialBinding says which outbound requests receive which credential.
type CredentialBinding struct {
	Name  string          `json:"name"`
	Match CredentialMatch `json:"match"`
	Auth  CredentialAuth  `json:"auth"`
}

// CredentialMatch selects requests. Every list is OR within itself and AND
// across lists; only Hosts is required and empty lists take the defaults
// noted per field.
type CredentialMatch struct {
	Schemes []string `json:"schemes,omitempty"` // default [https]; https or http
	Ports   []int    `json:"ports,omitempty"`   // derived from Schemes (https 443, http 80); deprecated upstream
	Hosts   []string `json:"hosts"`             // exact host or *.domain (subdomains only)
	Methods []string `json:"methods,omitempty"` // default [GET POST PUT PATCH DELETE]
	Paths   []string `json:"paths,omitempty"`   // default ["/*"]; exact, or prefix when ending in *
}

// Credential auth types (CredentialAuth.Type).
const (
	CredentialAuthBearer        = "bearer"        // Authorization: Bearer <credential>
	CredentialAuthBasic         = "basic"         // Authorization: Basic <credential, already base64>
	CredentialAuthAPIKey        = "apiKey"        // <Name>: <credential>
	CredentialAuthCustomHeaders = "customHeaders" // one header per Headers entry
	CredentialAuthPassthrough   = "passthrough"   // no header; only Substitutions apply
)

// Surfaces of a request where a CredentialSubstitution may replace its
// placeholder (CredentialSubstitution.In).
const (
	CredentialSubstitutionPath   = "path"
	CredentialSubstitutionQuery  = "query"
	CredentialSubstitutionHeader = "header"
	CredentialSubstitutionBody   = "body"
)

// CredentialAuth says how a credential is injected. Credential is set for
// bearer, basic and apiKey; Name only for apiKey; Headers only for
// customHeaders. Substitutions, allowed with every type, replace
// placeholders the sandbox puts in its requests; a passthrough auth has
// only them.
type CredentialAuth struct {
	Type          string                   `json:"type"`
	Credential    string                   `json:"credential,omitempty"`
	Name          string                   `json:"name,omitempty"`
	Headers       []CredentialHeaderSource `json:"headers,omitempty"`
	Substitutions []CredentialSubstitution `json:"substitutions,omitempty"`
}

// CredentialSubstitution replaces Placeholder, a literal case-sensitive
// string, with the value of Credential wherever it appears in the listed
// surfaces (In: path, query, header, body) of a request the binding
// matches. Requests to other hosts keep the placeholder.
type CredentialSubstitution struct {
	Credential  string   `json:"credential"`
	Placeholder string   `json:"placeholder"`
	In          []string `json:"in"`
}

// CredentialHeaderSource is one header of a customHeaders auth.
type CredentialHeaderSource struct {
	Name       string `json:"name"`
	Credential string `json:"credential"`
}

// CredentialMetadata describes a stored credential without its value.
type CredentialMetadata struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Revision   int64  `json:"revision"`
}

// CredentialAuthMetadata is the sanitized auth of a binding.
type CredentialAuthMetadata struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// CredentialBindingMetadata describes a stored binding without secrets.
type CredentialBindingMetadata struct {
	Name     string                  `json:"name"`
	Revision int64                   `json:"revision"`
	Match    *CredentialMatch        `json:"match,omitempty"`
	Auth     *CredentialAuthMetadata `json:"auth,omitempty"`
}

// CredentialVaultState is the sanitized state of the credential vault.
type CredentialVaultState struct {
	Revision    int64                       `json:"revision"`
	Credentials []CredentialMetadata        `json:"credentials"`
	Bindings    []CredentialBindingMetadata `json:"bindings"`
}

// CredentialList is the reply of GET /credential-vault/credentials.
type CredentialList struct {
	Revision    int64                `json:"revision"`
	Credentials []CredentialMetadata `json:"credentials"`
}

// CredentialBindingList is the reply of GET /credential-vault/bindings.
type CredentialBindingList struct {
	Revision int64                       `json:"revision"`
	Bindings []CredentialBindingMetadata `json:"bindings"`
}

// CreateCredentialVaultRequest is the body of POST /credential-vault.
type CreateCredentialVaultRequest struct {
	Credentials []Credential        `json:"credentials"`
	Bindings    []CredentialBinding `json:"bindings"`
}

// LogValue implements slog.LogValuer: names only, no secret values.
func (r CreateCredentialVaultRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("credentials", credentialNames(r.Credentials)), slog.Int("bindings", len(r.Bindings)))
}

func credentialNames(cs []Credential) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// PatchCredentialVaultRequest is the body of PATCH /credential-vault: one
// atomic change. ExpectedRevision, when set, makes the change fail with a
// conflict unless the vault is still at that revision.
type PatchCredentialVaultRequest struct {
	ExpectedRevision *int64                      `json:"expectedRevision,omitempty"`
	Credentials      *CredentialMutations        `json:"credentials,omitempty"`
	Bindings         *CredentialBindingMutations `json:"bindings,omitempty"`
}

// LogValue implements slog.LogValuer: names only, no secret values.
func (r PatchCredentialVaultRequest) LogValue() slog.Value {
	var attrs []slog.Attr
	if r.ExpectedRevision != nil {
		attrs = append(attrs, slog.Int64("expectedRevision", *r.ExpectedRevision))
	}
	if c := r.Credentials; c != nil {
		attrs = append(attrs, slog.Any("credentials", *c))
	}
	if b := r.Bindings; b != nil {
		attrs = append(attrs, slog.Group("bindings",
			slog.Int("add", len(b.Add)), slog.Int("replace", len(b.Replace)), slog.Any("delete", b.Delete)))
	}
	return slog.GroupValue(attrs...)
}

// CredentialMutations adds, replaces and deletes (by name) credentials.
// The sidecar applies deletes first, then replaces (which must exist), then
// adds (which must not); a name may appear once.
type CredentialMutations struct {
	Add     []Credential `json:"add,omitempty"`
	Replace []Credential `json:"replace,omitempty"`
	Delete  []string     `json:"delete,omitempty"`
}

// LogValue implements slog.LogValuer: names only, no secret values.
func (m CredentialMutations) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("add", credentialNames(m.Add)), slog.Any("replace", credentialNames(m.Replace)), slog.Any("delete", m.Delete))
}

// CredentialBindingMutations adds, replaces and deletes (by name) bindings.
type CredentialBindingMutations struct {
	Add     []CredentialBinding `json:"add,omitempty"`
	Replace []CredentialBinding `json:"replace,omitempty"`
	Delete  []string            `json:"delete,omitempty"`
}
