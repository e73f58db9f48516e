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
	ctx := r.Context()
	defer s.locks.lock(id)()
	rs, o, err := s.lookup(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if effectiveExpiry(rs, o) == nil {
		s.writeError(w, r, apierror.New(http.StatusConflict, apierror.CodeInvalidExpiration,
			"sandbox %q was created without a timeout and does not expire; it cannot be renewed", id))
		return
	}
	now := s.now()
	at := req.ExpiresAt.UTC()
	if !at.After(now) {
		s.writeError(w, r, apierror.BadRequest(apierror.CodeInvalidExpiration,
			"expiresAt %s is not in the future", at.Format("2006-01-02T15:04:05Z07:00")))
		return
	}
	if s.cfg.MaxTimeout > 0 && at.Sub(now) > s.cfg.MaxTimeout {
		s.writeError(w, r, apierror.BadRequest(apierror.CodeInvalidExpiration,
			"expiresAt %s is more than the maximum timeout (%s) from now", at.Format("2006-01-02T15:04:05Z07:00"), s.cfg.MaxTimeout))
		return
	}
	o.ExpiresAt = &at
	if err := s.store.PutOverrides(ctx, id, o); err != nil {
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	s.expiry.set(id, at)
	s.reqLog(r).Info("sandbox expiry renewed", "sandbox", id, "expires_at", at)
	apierror.WriteJSON(w, http.StatusOK, sandbox.RenewSandboxExpirationResponse{ExpiresAt: at})
}
