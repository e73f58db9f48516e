// Package sidecar wires the egress sidecar together: the policy store, the
// nftables firewall, the filtering DNS proxy, the HTTP API on port 18080,
// the credential vault and, when the credential proxy is on, the
// transparent TLS proxy with its per-sandbox CA.
//
// Run must execute inside the sandbox's network namespace with
// CAP_NET_ADMIN. It programs the firewall before anything listens, never
// removes it on the way out and refuses to start without it: a sandbox
// whose sidecar is missing or not ready has a closed network, not an open
// one.
//
// Configuration comes from the environment (FromEnv), under the variable
// names the upstream sidecar uses where they exist; see docs/egress.md.
package sidecar
