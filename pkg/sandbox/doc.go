// Package sandbox is the Go SDK for OpenSandbox and the single home of the
// project's wire types: the JSON shapes spoken by the lifecycle server,
// execd and egress. Servers and the CLI import these types instead of
// declaring their own, so a field is spelled once.
//
// The types in execd_types.go mirror the execd API (api/execd.yaml).
package sandbox
