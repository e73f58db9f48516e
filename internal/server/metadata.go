package server

import (
	"encoding/json"
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// patchMetadata applies a JSON Merge Patch (RFC 7396) to the sandbox's
// metadata (see lifecycle.Service.PatchMetadata).
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
	rs, err := s.lc.PatchMetadata(r.Context(), id, patch)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, view(rs))
}
