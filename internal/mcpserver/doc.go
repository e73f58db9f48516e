// Package mcpserver exposes OpenSandbox as Model Context Protocol tools:
// sandbox lifecycle (create, connect, kill, info, list, renew, metrics,
// health, endpoints), commands, files and the egress policy, built on the
// Go SDK in pkg/sandbox and the MCP go-sdk. The credential vault is not
// exposed: its writes carry secret values, which must not pass through a
// model's context.
//
// New returns an *mcp.Server with every tool registered; the caller runs it
// on a transport (stdio, or ServeHTTP for streamable HTTP). Tools that talk
// to a sandbox's execd need a live handle, which the server keeps in a
// registry filled by sandbox_create and sandbox_connect; such a tool on an
// unknown id fails with a tool error unless connect_if_missing is set.
// Every failure is a tool error (an IsError result the model can read),
// never a protocol error.
//
// The package must not import the server or runtime internals: it speaks to
// the platform only through the public SDK, as any client would.
package mcpserver
