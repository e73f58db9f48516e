package server

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// getEndpoint tells a client where to reach a port of a sandbox and which
// headers to send: through this server's proxy with use_server_proxy,
// otherwise at the address the runtime gives (possibly through execd's
// own /proxy/{port}).
func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	viaServer, err := parseBool(q, "use_server_proxy")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, ok := q["expires"]; ok {
		if viaServer {
			s.writeError(w, r, badRequest("expires cannot be combined with use_server_proxy=true"))
			return
		}
		s.writeError(w, r, notSupported("expires: signed routes need the ingress gateway, which this server does not run"))
		return
	}
	ctx := r.Context()
	rs, err := s.rt.Get(ctx, id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	if rs.State != sandbox.StateRunning {
		s.writeError(w, r, apierror.New(http.StatusConflict, apierror.CodeSandboxNotRunning,
			"sandbox %q is %s, not Running", id, rs.State))
		return
	}
	if viaServer {
		// The proxy adds execd's token itself; the caller needs no header
		// but the sidecar's, which the proxy never adds (it answers
		// without the API key).
		ep := sandbox.Endpoint{Endpoint: proxyEndpoint(s.cfg.PublicHost, r.Host, id, port)}
		addEgressToken(&ep, port, rs)
		apierror.WriteJSON(w, http.StatusOK, ep)
		return
	}
	addr, err := s.rt.Address(ctx, id, port)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, runningCodes, subjectSandbox(id)))
		return
	}
	ep := sandbox.Endpoint{Endpoint: directEndpoint(s.cfg.PublicHost, addr)}
	if reachesExecd(port, addr) && rs.ExecdToken != "" {
		ep.Headers = map[string]string{sandbox.AccessTokenHeader: rs.ExecdToken}
	}
	addEgressToken(&ep, port, rs)
	apierror.WriteJSON(w, http.StatusOK, ep)
}

// addEgressToken gives the sidecar's token with the sidecar's port.
func addEgressToken(ep *sandbox.Endpoint, port int, rs runtime.Sandbox) {
	if port != sandbox.EgressPort || rs.EgressToken == "" {
		return
	}
	if ep.Headers == nil {
		ep.Headers = map[string]string{}
	}
	ep.Headers[sandbox.EgressAuthHeader] = rs.EgressToken
}

// reachesExecd reports whether requests to addr are served by execd
// (which wants its token): execd's own port, or any port reached through
// execd's /proxy.
func reachesExecd(port int, addr runtime.Address) bool {
	return port == sandbox.ExecdPort || addr.PathPrefix != ""
}

// directEndpoint is "host:port/prefix" for a runtime address, with the
// host replaced by publicHost when set.
func directEndpoint(publicHost string, addr runtime.Address) string {
	host := addr.Host
	if publicHost != "" {
		host = publicHost
	}
	return net.JoinHostPort(host, strconv.Itoa(addr.Port)) + addr.PathPrefix
}

// proxyEndpoint is the server-proxy address of a sandbox port, rooted at
// /sandboxes without /v1 (as upstream clients expect). The host is the
// one the request came to; publicHost, when set, replaces its host part
// and keeps its port (PublicHost carries no port, and the server's port
// is what the caller just used).
func proxyEndpoint(publicHost, requestHost, id string, port int) string {
	host := stripScheme(requestHost)
	if publicHost != "" {
		host = stripScheme(publicHost)
		if _, p, err := net.SplitHostPort(requestHost); err == nil && p != "" {
			host = net.JoinHostPort(strings.Trim(host, "[]"), p)
		}
	}
	return host + "/sandboxes/" + url.PathEscape(id) + "/proxy/" + strconv.Itoa(port)
}

func stripScheme(h string) string {
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	return strings.TrimSuffix(h, "/")
}

// parsePort reads a port number from 1 to 65535.
func parsePort(raw string) (int, error) {
	p, err := strconv.Atoi(raw)
	if err != nil || p < 1 || p > 65535 {
		return 0, badRequest("port %q must be an integer from 1 to 65535", raw)
	}
	return p, nil
}

// parseBool reads an optional boolean query parameter ("true", "1",
// "True", "false", "0" ...); absent or empty is false.
func parseBool(q map[string][]string, key string) (bool, error) {
	v, ok := single(q, key)
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s %q must be true or false", key, v)
	}
	return b, nil
}
