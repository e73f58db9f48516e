package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// renewExpiration moves a sandbox's expiry to the time in the body, which
// must lie in the future and within MaxTimeout from now.
func (s *Server) renewExpiration(w http.ResponseWriter, r *http.Request) {
	var req sandbox.RenewSandboxExpirationRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		var perr *time.ParseError
		if errors.As(err, &perr) {
			err = badRequest("expiresAt %q is not an RFC 3339 time", perr.Value)
		}
		s.writeError(w, r, err)
		return
	}
	if req.ExpiresAt.IsZero() {
		s.writeError(w, r, badRequest("expiresAt is required (an RFC 3339 time)"))
		return
	}
	id := sandboxID(r)
	at, err := s.lc.Renew(r.Context(), id, req.ExpiresAt)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, sandbox.RenewSandboxExpirationResponse{ExpiresAt: at})
}
