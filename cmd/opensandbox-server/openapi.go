package main

import (
	"encoding/json"
	"fmt"

	"github.com/getkin/kin-openapi/openapi3"
)

// openAPIJSON converts the embedded YAML OpenAPI document to the JSON
// served at /openapi.json.
func openAPIJSON(yamlDoc []byte) ([]byte, error) {
	doc, err := openapi3.NewLoader().LoadFromData(yamlDoc)
	if err != nil {
		return nil, fmt.Errorf("load OpenAPI document: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode OpenAPI document: %w", err)
	}
	return b, nil
}
