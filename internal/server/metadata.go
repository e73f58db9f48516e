package server

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// patchMetadata applies a JSON Merge Patch (RFC 7396) to the sandbox's
// effective metadata: a string value sets a key, null deletes it, {}
// changes nothing. The result is stored as the metadata override.
func (s *Server) patchMetadata(w http.ResponseWriter, r *http.Request) {
	var patch map[string]json.RawMessage
	if err := decodeJSON(w, r, &patch, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if patch == nil {
		s.writeError(w, r, badRequest("the body must be a JSON object of metadata keys"))
		return
	}
	id := sandboxID(r)
	ctx := r.Context()
	defer s.locks.lock(id)()
	rs, o, err := s.lookup(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	merged, err := mergePatch(effectiveMetadata(rs, o), patch)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o.Metadata = merged
	if err := s.store.PutOverrides(ctx, id, o); err != nil {
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, view(rs, o))
}

// mergePatch returns a copy of current with patch applied. Values must be
// strings or null, and every key set must follow the label rules. The
// result is never nil, so an emptied map still overrides the runtime's.
func mergePatch(current map[string]string, patch map[string]json.RawMessage) (map[string]string, error) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(patch)) {
		raw := bytes.TrimSpace(patch[k])
		if bytes.Equal(raw, []byte("null")) {
			delete(out, k)
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, badRequest("metadata %q: the value must be a string or null", k)
		}
		if err := checkLabel(k, v); err != nil {
			return nil, badRequest("metadata: %v", err)
		}
		out[k] = v
	}
	return out, nil
}
