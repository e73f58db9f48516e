// Package api holds the project's OpenAPI documents, embedded so that
// programs can serve them without reading files at run time:
// lifecycle.yaml describes the lifecycle server's HTTP API and execd.yaml
// the API of the daemon that runs inside every sandbox. Both are OpenAPI
// 3.0.3 in YAML; the lifecycle server converts its document to JSON to
// serve it at /openapi.json.
package api

import _ "embed"

// LifecycleYAML is api/lifecycle.yaml, the OpenAPI document of the
// lifecycle server.
//
//go:embed lifecycle.yaml
var LifecycleYAML []byte

// ExecdYAML is api/execd.yaml, the OpenAPI document of execd.
//
//go:embed execd.yaml
var ExecdYAML []byte
