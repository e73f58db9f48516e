package vault

import (
	"encoding/json"
	"log/slog"
)

// Secret is a credential value. It is a string underneath, but it formats,
// marshals to JSON and logs as "[REDACTED]" so that a stray %v, json.Marshal
// or slog call cannot leak it. Only UnmarshalJSON sees the real value.
type Secret string

const redacted = "[REDACTED]"

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return redacted }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON implements json.Marshaler.
func (Secret) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

// UnmarshalJSON implements json.Unmarshaler.
func (s *Secret) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Secret(v)
	return nil
}

// SourceInline is the only credential source type: the value travels in the
// request body.
const SourceInline = "inline"

// Auth types of a binding.
const (
	AuthBearer        = "bearer"        // Authorization: Bearer <credential>
	AuthBasic         = "basic"         // Authorization: Basic <credential> (already base64 user:pass)
	AuthAPIKey        = "apiKey"        // <name>: <credential>
	AuthCustomHeaders = "customHeaders" // one header per entry of headers
)

// Credential is a named secret. Value is write-only.
type Credential struct {
	Name   string           `json:"name"`
	Source CredentialSource `json:"source"`
}

// CredentialSource says where a credential's value comes from.
type CredentialSource struct {
	Type  string `json:"type"`            // required; "inline"
	Value Secret `json:"value,omitempty"` // required for inline; never returned
}

// CredentialBinding binds requests matched by Match to the headers built by Auth.
type CredentialBinding struct {
	Name  string       `json:"name"`
	Match RequestMatch `json:"match"`
	Auth  Auth         `json:"auth"`
}

// RequestMatch selects requests. Every list is OR within itself and AND
// across lists. Empty lists take the defaults noted per field.
type RequestMatch struct {
	Schemes []string `json:"schemes,omitempty"` // default [https]; https or http
	Ports   []int    `json:"ports,omitempty"`   // default [443]
	Hosts   []string `json:"hosts"`             // required; exact host or *.domain (subdomains only)
	Methods []string `json:"methods,omitempty"` // default [GET POST PUT PATCH DELETE]
	Paths   []string `json:"paths,omitempty"`   // default ["/*"]; exact, or prefix when ending in *
}

// Auth says which headers to inject. Which fields apply depends on Type.
type Auth struct {
	Type       string      `json:"type"`
	Credential string      `json:"credential,omitempty"` // bearer, basic, apiKey
	Name       string      `json:"name,omitempty"`       // apiKey: header name
	Headers    []HeaderRef `json:"headers,omitempty"`    // customHeaders: at least one
}

// HeaderRef is one injected header of a customHeaders auth.
type HeaderRef struct {
	Name       string `json:"name"`
	Credential string `json:"credential"`
}

// CreateRequest is the body of POST /credential-vault.
type CreateRequest struct {
	Credentials []Credential        `json:"credentials"`
	Bindings    []CredentialBinding `json:"bindings"`
}

// PatchRequest is the body of PATCH /credential-vault. When ExpectedRevision
// is set and differs from the current revision the patch fails with ErrConflict.
type PatchRequest struct {
	ExpectedRevision *int64         `json:"expectedRevision,omitempty"`
	Credentials      *CredentialOps `json:"credentials,omitempty"`
	Bindings         *BindingOps    `json:"bindings,omitempty"`
}

// CredentialOps changes credentials. Deletes apply first, then replaces
// (which must exist), then adds (which must not); a name may appear once.
type CredentialOps struct {
	Add     []Credential `json:"add,omitempty"`
	Replace []Credential `json:"replace,omitempty"`
	Delete  []string     `json:"delete,omitempty"`
}

// BindingOps changes bindings, with the same rules as CredentialOps.
type BindingOps struct {
	Add     []CredentialBinding `json:"add,omitempty"`
	Replace []CredentialBinding `json:"replace,omitempty"`
	Delete  []string            `json:"delete,omitempty"`
}

// CredentialMetadata is the sanitized view of a credential.
type CredentialMetadata struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Revision   int64  `json:"revision"`
}

// CredentialBindingMetadata is the sanitized view of a binding. Match is
// shown with defaults filled in.
type CredentialBindingMetadata struct {
	Name     string        `json:"name"`
	Revision int64         `json:"revision"`
	Match    *RequestMatch `json:"match,omitempty"`
	Auth     *AuthMetadata `json:"auth,omitempty"`
}

// AuthMetadata is the sanitized view of an Auth: its type and, for apiKey,
// the header name.
type AuthMetadata struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// State is the sanitized view of the whole vault.
type State struct {
	Revision    int64                       `json:"revision"`
	Credentials []CredentialMetadata        `json:"credentials"`
	Bindings    []CredentialBindingMetadata `json:"bindings"`
}

// CredentialList is the body of GET /credential-vault/credentials.
type CredentialList struct {
	Revision    int64                `json:"revision"`
	Credentials []CredentialMetadata `json:"credentials"`
}

// BindingList is the body of GET /credential-vault/bindings.
type BindingList struct {
	Revision int64                       `json:"revision"`
	Bindings []CredentialBindingMetadata `json:"bindings"`
}
