package server

import (
	"maps"
	"slices"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
)

// checkMetadata applies the label rules of internal/grammar to every pair
// of m; field names the map in messages (e.g. "metadata").
func checkMetadata(field string, m map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := checkLabel(k, m[k]); err != nil {
			return badRequest("%s: %v", field, err)
		}
	}
	return nil
}

// checkLabel applies the label rules to one metadata pair (see
// grammar.CheckLabel).
func checkLabel(key, value string) error { return grammar.CheckLabel(key, value) }
