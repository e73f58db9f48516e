package sandbox

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

// Credential is a secret held by the sidecar's credential vault. Its value
// is write-only: the API never returns it.
type Credential struct {
	Name   string           `json:"name"`
	Source CredentialSource `json:"source"`
}

// CredentialSource says where a credential's value comes from. Type is
// "inline" (the only source today) and Value is the secret itself.
type CredentialSource struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// CredentialBinding says which outbound requests receive which credential.
type CredentialBinding struct {
	Name  string          `json:"name"`
	Match CredentialMatch `json:"match"`
	Auth  CredentialAuth  `json:"auth"`
}

// CredentialMatch selects requests. Only Hosts is required; the sidecar
// defaults Schemes to [https], Ports to [443], Methods to
// [GET POST PUT PATCH DELETE] and Paths to ["/*"].
type CredentialMatch struct {
	Schemes []string `json:"schemes,omitempty"`
	Ports   []int    `json:"ports,omitempty"`
	Hosts   []string `json:"hosts"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// Credential auth types (CredentialAuth.Type).
const (
	CredentialAuthBearer        = "bearer"        // Authorization: Bearer <credential>
	CredentialAuthBasic         = "basic"         // Authorization: Basic <credential, already base64>
	CredentialAuthAPIKey        = "apiKey"        // <Name>: <credential>
	CredentialAuthCustomHeaders = "customHeaders" // one header per Headers entry
)

// CredentialAuth says how a credential is injected. Credential is set for
// bearer, basic and apiKey; Name only for apiKey; Headers only for
// customHeaders.
type CredentialAuth struct {
	Type       string                   `json:"type"`
	Credential string                   `json:"credential,omitempty"`
	Name       string                   `json:"name,omitempty"`
	Headers    []CredentialHeaderSource `json:"headers,omitempty"`
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

// PatchCredentialVaultRequest is the body of PATCH /credential-vault: one
// atomic change. ExpectedRevision, when set, makes the change fail with a
// conflict unless the vault is still at that revision.
type PatchCredentialVaultRequest struct {
	ExpectedRevision *int64                      `json:"expectedRevision,omitempty"`
	Credentials      *CredentialMutations        `json:"credentials,omitempty"`
	Bindings         *CredentialBindingMutations `json:"bindings,omitempty"`
}

// CredentialMutations adds, replaces and deletes (by name) credentials.
type CredentialMutations struct {
	Add     []Credential `json:"add,omitempty"`
	Replace []Credential `json:"replace,omitempty"`
	Delete  []string     `json:"delete,omitempty"`
}

// CredentialBindingMutations adds, replaces and deletes (by name) bindings.
type CredentialBindingMutations struct {
	Add     []CredentialBinding `json:"add,omitempty"`
	Replace []CredentialBinding `json:"replace,omitempty"`
	Delete  []string            `json:"delete,omitempty"`
}
