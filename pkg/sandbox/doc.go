// Package sandbox is the Go SDK for OpenSandbox and the single home of the
// project's wire types: the JSON shapes spoken by the lifecycle server,
// execd and egress. Servers and the CLI import these types instead of
// declaring their own, so a field is spelled once.
//
// The types in execd_types.go mirror the execd API (api/execd.yaml), those
// in lifecycle_types.go the lifecycle API (api/lifecycle.yaml).
//
// A Client talks to the lifecycle server; a Sandbox is a handle on one
// running sandbox and talks to the execd daemon inside it:
//
//	c, err := sandbox.NewClient(sandbox.WithDomain("localhost:8080"), sandbox.WithAPIKey(key))
//	if err != nil { ... }
//	sb, err := c.Create(ctx, sandbox.CreateOptions{Image: "opensandbox/base:latest"})
//	if err != nil { ... }
//	defer sb.Kill(context.WithoutCancel(ctx))
//
//	ex, err := sb.Run(ctx, "echo hello", sandbox.RunOptions{})
//	if err != nil { ... }          // transport or API failure
//	fmt.Println(ex.ExitCode, ex.Text())
//
//	err = sb.WriteFile(ctx, "/tmp/note.txt", []byte("hi\n"), sandbox.WriteOptions{Mode: 644})
//	data, err := sb.ReadFile(ctx, "/tmp/note.txt")
//
// Sandbox.Egress and Sandbox.CredentialVault talk to the egress sidecar of
// a sandbox created with a NetworkPolicy (its types are in egress_types.go).
//
// Errors from the servers are *APIError values; test them with IsNotFound,
// IsConflict and IsUnauthorized. Context errors come back undecorated.
// NewClient also reads OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY,
// OPEN_SANDBOX_PROTOCOL and OPEN_SANDBOX_USE_SERVER_PROXY.
package sandbox
