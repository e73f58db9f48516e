package sandbox

import (
	"context"
	"net/http"
	"net/url"
)

// CredentialVault manages the credential vault of one sandbox's egress
// sidecar: credentials (secret values, write-only) and bindings (which
// outbound HTTPS requests receive which credential). The sandbox must have
// been created with a NetworkPolicy and CredentialProxy.
//
// Replies are metadata only: no call returns a secret value. The sidecar
// accepts writes only over TLS or from a loopback address; the lifecycle
// server's endpoint (directly through execd's proxy, or the server proxy)
// provides that. Errors are *APIError values as for Egress: a second
// Create, or a Patch whose ExpectedRevision is stale, fails with status 409
// (IsConflict); reading a vault or item that does not exist, with 404
// (IsNotFound). A CredentialVault is safe for concurrent use.
type CredentialVault struct {
	e *Egress
}

// CredentialVault returns the vault client of the sandbox's egress sidecar;
// it shares the endpoint of Egress.
func (s *Sandbox) CredentialVault() *CredentialVault { return &CredentialVault{e: s.Egress()} }

// CredentialVault returns the vault client of sandbox id's egress sidecar.
// It does not contact anything until its first call.
func (c *Client) CredentialVault(id string) *CredentialVault {
	return &CredentialVault{e: c.Egress(id)}
}

// Create writes the vault (POST /credential-vault) and returns its state.
// It fails with 409 when a vault exists and 412 while the credential
// proxy is not ready.
func (v *CredentialVault) Create(ctx context.Context, req CreateCredentialVaultRequest) (*CredentialVaultState, error) {
	// The contract wants arrays, never null.
	if req.Credentials == nil {
		req.Credentials = []Credential{}
	}
	if req.Bindings == nil {
		req.Bindings = []CredentialBinding{}
	}
	var st CredentialVaultState
	if err := v.e.do(ctx, http.MethodPost, "/credential-vault", req, &st); err != nil {
		return nil, wrap(err, "create credential vault of sandbox %s", v.e.id)
	}
	return &st, nil
}

// Get returns the vault's state.
func (v *CredentialVault) Get(ctx context.Context) (*CredentialVaultState, error) {
	var st CredentialVaultState
	if err := v.e.do(ctx, http.MethodGet, "/credential-vault", nil, &st); err != nil {
		return nil, wrap(err, "get credential vault of sandbox %s", v.e.id)
	}
	return &st, nil
}

// Patch changes the vault in one atomic step (PATCH /credential-vault).
// With req.ExpectedRevision set, it fails with 409 unless the vault is
// still at that revision.
func (v *CredentialVault) Patch(ctx context.Context, req PatchCredentialVaultRequest) (*CredentialVaultState, error) {
	var st CredentialVaultState
	if err := v.e.do(ctx, http.MethodPatch, "/credential-vault", req, &st); err != nil {
		return nil, wrap(err, "patch credential vault of sandbox %s", v.e.id)
	}
	return &st, nil
}

// Delete removes the vault; requests are no longer given credentials.
func (v *CredentialVault) Delete(ctx context.Context) error {
	err := v.e.do(ctx, http.MethodDelete, "/credential-vault", nil, nil)
	return wrap(err, "delete credential vault of sandbox %s", v.e.id)
}

// ListCredentials returns the metadata of every credential.
func (v *CredentialVault) ListCredentials(ctx context.Context) (*CredentialList, error) {
	var l CredentialList
	if err := v.e.do(ctx, http.MethodGet, "/credential-vault/credentials", nil, &l); err != nil {
		return nil, wrap(err, "list credentials of sandbox %s", v.e.id)
	}
	return &l, nil
}

// GetCredential returns the metadata of credential name.
func (v *CredentialVault) GetCredential(ctx context.Context, name string) (*CredentialMetadata, error) {
	var m CredentialMetadata
	if err := v.e.do(ctx, http.MethodGet, "/credential-vault/credentials/"+url.PathEscape(name), nil, &m); err != nil {
		return nil, wrap(err, "get credential %q of sandbox %s", name, v.e.id)
	}
	return &m, nil
}

// ListBindings returns the metadata of every binding.
func (v *CredentialVault) ListBindings(ctx context.Context) (*CredentialBindingList, error) {
	var l CredentialBindingList
	if err := v.e.do(ctx, http.MethodGet, "/credential-vault/bindings", nil, &l); err != nil {
		return nil, wrap(err, "list credential bindings of sandbox %s", v.e.id)
	}
	return &l, nil
}

// GetBinding returns the metadata of binding name, its match shown with
// the sidecar's defaults filled in.
func (v *CredentialVault) GetBinding(ctx context.Context, name string) (*CredentialBindingMetadata, error) {
	var m CredentialBindingMetadata
	if err := v.e.do(ctx, http.MethodGet, "/credential-vault/bindings/"+url.PathEscape(name), nil, &m); err != nil {
		return nil, wrap(err, "get credential binding %q of sandbox %s", name, v.e.id)
	}
	return &m, nil
}
