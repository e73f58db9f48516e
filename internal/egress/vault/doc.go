// Package vault is the egress sidecar's credential vault: the credentials the
// host writes for a sandbox, the bindings that say which outbound requests
// (HTTPS, or plain HTTP for scheme http) receive which auth headers and
// which placeholders in them are replaced by which credentials, and the
// HTTP routes under /credential-vault that manage them.
//
// Secret values are write-only. They enter through Create and Patch, leave
// only in the plans returned by Store.Match (for the proxies), and never
// appear in a view, an error message or a log line: the Secret type formats
// and logs as "[REDACTED]", and replies are built from metadata views only
// (a Secret marshals to JSON as its real value, because the SDK must send
// it here).
//
// Every change bumps the vault revision; each credential and binding carries
// the revision at which it last changed. Bindings are validated as a whole:
// an unknown credential, a bad header name, a duplicate name or two bindings
// that could match the same request is rejected, so Match finds at most one.
//
// The wire types are the SDK's (pkg/sandbox), aliased in types.go. Beyond
// them the package depends on the standard library and package inject
// (the plan type) only and must not import
// the TLS proxy, the policy engine or anything that talks to a container
// runtime.
package vault
