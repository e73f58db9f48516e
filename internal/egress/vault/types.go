package vault

import "github.com/opensandbox-go/opensandbox/pkg/sandbox"

// The vault's wire types are the SDK's (pkg/sandbox), so that the host side
// and the sidecar spell every field once. The names below are aliases kept
// for the vault's own code and its callers; they are the same types.

// Secret is a credential value; see sandbox.Secret. It prints and logs as
// "[REDACTED]". It marshals to JSON as the real value, which is why the
// handler only ever writes metadata views, never a Credential.
type Secret = sandbox.Secret

// SourceInline is the only credential source type: the value travels in the
// request body.
const SourceInline = sandbox.CredentialSourceInline

// Auth types of a binding.
const (
	AuthBearer        = sandbox.CredentialAuthBearer        // Authorization: Bearer <credential>
	AuthBasic         = sandbox.CredentialAuthBasic         // Authorization: Basic <credential> (already base64 user:pass)
	AuthAPIKey        = sandbox.CredentialAuthAPIKey        // <name>: <credential>
	AuthCustomHeaders = sandbox.CredentialAuthCustomHeaders // one header per entry of headers
	AuthPassthrough   = sandbox.CredentialAuthPassthrough   // no header: only substitutions
)

// Request types (bodies of POST and PATCH /credential-vault).
type (
	// Credential is a named secret. Its value is write-only.
	Credential = sandbox.Credential
	// CredentialSource says where a credential's value comes from.
	CredentialSource = sandbox.CredentialSource
	// CredentialBinding binds requests matched by Match to the headers built by Auth.
	CredentialBinding = sandbox.CredentialBinding
	// RequestMatch selects requests.
	RequestMatch = sandbox.CredentialMatch
	// Auth says which headers to inject.
	Auth = sandbox.CredentialAuth
	// HeaderRef is one injected header of a customHeaders auth.
	HeaderRef = sandbox.CredentialHeaderSource
	// Substitution replaces a placeholder with a credential's value.
	Substitution = sandbox.CredentialSubstitution
	// CreateRequest is the body of POST /credential-vault.
	CreateRequest = sandbox.CreateCredentialVaultRequest
	// PatchRequest is the body of PATCH /credential-vault. When
	// ExpectedRevision is set and differs from the current revision the
	// patch fails with ErrConflict.
	PatchRequest = sandbox.PatchCredentialVaultRequest
	// CredentialOps changes credentials: deletes first, then replaces
	// (which must exist), then adds (which must not); a name may appear once.
	CredentialOps = sandbox.CredentialMutations
	// BindingOps changes bindings, with the same rules as CredentialOps.
	BindingOps = sandbox.CredentialBindingMutations
)

// Reply types: sanitized views, never a secret value.
type (
	// CredentialMetadata is the sanitized view of a credential.
	CredentialMetadata = sandbox.CredentialMetadata
	// CredentialBindingMetadata is the sanitized view of a binding; Match
	// is shown with defaults filled in.
	CredentialBindingMetadata = sandbox.CredentialBindingMetadata
	// AuthMetadata is the sanitized view of an Auth: its type and, for
	// apiKey, the header name.
	AuthMetadata = sandbox.CredentialAuthMetadata
	// State is the sanitized view of the whole vault.
	State = sandbox.CredentialVaultState
	// CredentialList is the body of GET /credential-vault/credentials.
	CredentialList = sandbox.CredentialList
	// BindingList is the body of GET /credential-vault/bindings.
	BindingList = sandbox.CredentialBindingList
)
