// Package osbcli implements osb, the OpenSandbox command-line client, on
// top of the Go SDK (pkg/sandbox). Run is its only entry point; each
// command group and subcommand lives in a file of its own
// (sandbox_create.go, file_cat.go, shell.go, ...), while config.go,
// output.go, errors.go and spinner.go hold what they share.
//
// The package talks to the lifecycle server and to execd only through
// pkg/sandbox, except for the few routes the SDK does not wrap (scoped
// diagnostics, the PTY WebSocket), which it calls with plain net/http and
// github.com/coder/websocket. It must not import the server or execd.
package osbcli
