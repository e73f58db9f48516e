package server

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// A pooled execd starts before its sandbox exists (a warm pool's pod), so
// it cannot know the sandbox's token. It starts with the pool's claim
// token instead and serves nothing but POST /claim, which the server calls
// once when it hands the pod to a sandbox: the body carries the sandbox's
// own access token (and its environment), and from then on execd behaves
// as if started with that token. The claim token works once: a second
// claim is refused, so a pod never changes hands while it lives.

// ClaimPath is the route of the one-time claim.
const ClaimPath = "/claim"

// CodeAlreadyClaimed answers a claim of an execd that was claimed before.
const CodeAlreadyClaimed = "ALREADY_CLAIMED"

// gate decides which token a request must carry.
type gate struct {
	mu      sync.RWMutex
	access  string // "" while unclaimed
	claim   string // "" when execd was not started for a pool
	claimed bool
}

func (g *gate) accessToken() string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.access
}

// claimRequest is the body of POST /claim.
type claimRequest struct {
	AccessToken string            `json:"accessToken"`
	Env         map[string]string `json:"env,omitempty"`
}

// minClaimedTokenLen keeps a claim from setting a guessable token.
const minClaimedTokenLen = 16

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	g := s.gate
	if g.claim == "" {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeRouteNotFound, "this execd was not started for a pool: nothing to claim"))
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(sandbox.AccessTokenHeader)), []byte(g.claim)) != 1 {
		unauthorized(w, "Unauthorized: invalid or missing claim token in header "+sandbox.AccessTokenHeader)
		return
	}
	var req claimRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "claim body: %v", err))
		return
	}
	if err := checkClaim(req); err != nil {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "%v", err))
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.claimed {
		apierror.Write(w, r, apierror.New(http.StatusConflict, CodeAlreadyClaimed, "this execd was claimed before; a pool pod serves one sandbox"))
		return
	}
	// The environment first: every process started after the claim (and
	// none was before) inherits it.
	for k, v := range req.Env {
		os.Setenv(k, v)
	}
	g.access, g.claimed = req.AccessToken, true
	s.cfg.Logger.Info("execd claimed for a sandbox", "env", len(req.Env))
	w.WriteHeader(http.StatusNoContent)
}

func checkClaim(req claimRequest) error {
	if len(req.AccessToken) < minClaimedTokenLen {
		return fmt.Errorf("accessToken: at least %d characters required", minClaimedTokenLen)
	}
	if strings.ContainsAny(req.AccessToken, "\x00\r\n") {
		return fmt.Errorf("accessToken: control characters are not allowed")
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env: invalid variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("env: %s contains a NUL byte", k)
		}
	}
	return nil
}

// unauthorized answers as upstream execd does: 401 with an "error" key,
// not code/message.
func unauthorized(w http.ResponseWriter, msg string) {
	apierror.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": msg})
}
