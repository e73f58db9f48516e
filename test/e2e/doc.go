// Package e2e holds end-to-end tests that run the project's real, built
// binaries as separate processes and talk to them over HTTP, checking every
// reply against the OpenAPI documents in api/. They run under `make e2e`
// (OSB_E2E=1, OSB_BIN_DIR pointing at the built binaries) and are skipped
// by a plain `go test ./...`.
package e2e
