package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Limits and defaults of the diagnostics parameters.
const (
	defaultLogTail      = 100
	defaultSummaryTail  = 50
	maxLogTail          = 10000
	defaultEventLimit   = 50
	defaultSummaryEvent = 20
	maxEventLimit       = 500
	// maxInlineDiagnostic caps the text carried inline in a descriptor;
	// the newest part is kept.
	maxInlineDiagnostic = 1 << 20
)

// diagnosticScopes are the scopes this server serves: the sandbox's
// container is all there is to describe on a single-engine runtime, so
// "all" is the same material.
var diagnosticScopes = []string{"container", "all"}

// diagnosticContent is the JSON descriptor of the stable diagnostics API
// (DiagnosticContentResponse). pkg/sandbox has no type for it yet.
type diagnosticContent struct {
	SandboxID     string   `json:"sandboxId"`
	Kind          string   `json:"kind"`
	Scope         string   `json:"scope"`
	Delivery      string   `json:"delivery"`
	ContentType   string   `json:"contentType"`
	Content       string   `json:"content"`
	ContentLength int      `json:"contentLength"`
	Truncated     bool     `json:"truncated"`
	Warnings      []string `json:"warnings"`
}

const textPlain = "text/plain; charset=utf-8"

func (s *Server) diagnosticLogs(w http.ResponseWriter, r *http.Request) {
	s.scopedDiagnostic(w, r, "logs", func(q url.Values, id string) (string, error) {
		tail, err := intParam(q, "tail", defaultLogTail, 1, maxLogTail)
		if err != nil {
			return "", err
		}
		since, err := parseSince(q)
		if err != nil {
			return "", err
		}
		logs, err := s.rt.Logs(r.Context(), id, runtime.LogOptions{Tail: tail, Since: since})
		if err != nil {
			return "", fromRuntime(err, sandboxCodes, subjectSandbox(id))
		}
		return string(logs), nil
	})
}

func (s *Server) diagnosticEvents(w http.ResponseWriter, r *http.Request) {
	s.scopedDiagnostic(w, r, "events", func(q url.Values, id string) (string, error) {
		limit, err := intParam(q, "limit", defaultEventLimit, 1, maxEventLimit)
		if err != nil {
			return "", err
		}
		events, err := s.rt.Events(r.Context(), id, limit)
		if err != nil {
			return "", fromRuntime(err, sandboxCodes, subjectSandbox(id))
		}
		return formatEvents(events), nil
	})
}

// scopedDiagnostic serves a diagnostic that has both the legacy plain-text
// form and the scoped JSON form: it parses the query and the scope, lets
// read parse its own parameters and fetch the text, and answers in the
// form the request asked for.
func (s *Server) scopedDiagnostic(w http.ResponseWriter, r *http.Request, kind string, read func(q url.Values, id string) (string, error)) {
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	scope, scoped, err := parseScope(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := sandboxID(r)
	text, err := read(q, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeDiagnostic(w, id, kind, scope, scoped, text)
}

func (s *Server) diagnosticInspect(w http.ResponseWriter, r *http.Request) {
	id := sandboxID(r)
	doc, err := s.rt.Inspect(r.Context(), id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	writeLegacyText(w, string(doc))
}

// diagnosticSummary is one report for humans: the sandbox's state, its
// recent events and its last log lines. A part that cannot be read says
// so instead of failing the reply; only a missing sandbox does.
func (s *Server) diagnosticSummary(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tail, err := intParam(q, "tail", defaultSummaryTail, 1, maxLogTail)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := intParam(q, "event_limit", defaultSummaryEvent, 1, maxEventLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := sandboxID(r)
	ctx := r.Context()
	rs, err := s.lookup(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var b strings.Builder
	v := view(rs)
	fmt.Fprintf(&b, "Sandbox %s\n", v.ID)
	fmt.Fprintf(&b, "State: %s", v.Status.State)
	if v.Status.Reason != "" {
		fmt.Fprintf(&b, " (%s)", v.Status.Reason)
	}
	if v.Status.Message != "" {
		fmt.Fprintf(&b, ": %s", v.Status.Message)
	}
	b.WriteString("\n")
	if v.Image != nil {
		fmt.Fprintf(&b, "Image: %s\n", v.Image.URI)
	}
	if v.SnapshotID != "" {
		fmt.Fprintf(&b, "Snapshot: %s\n", v.SnapshotID)
	}
	fmt.Fprintf(&b, "Created: %s\n", v.CreatedAt.Format(time.RFC3339))
	if v.ExpiresAt != nil {
		fmt.Fprintf(&b, "Expires: %s\n", v.ExpiresAt.Format(time.RFC3339))
	} else {
		b.WriteString("Expires: never (manual cleanup)\n")
	}

	fmt.Fprintf(&b, "\n== Events (last %d) ==\n", limit)
	if events, err := s.rt.Events(ctx, id, limit); err != nil {
		fmt.Fprintf(&b, "(events unavailable: %s)\n", fromRuntime(err, sandboxCodes, "").Message)
	} else if len(events) == 0 {
		b.WriteString("(none)\n")
	} else {
		b.WriteString(formatEvents(events))
	}

	fmt.Fprintf(&b, "\n== Logs (last %d lines) ==\n", tail)
	if logs, err := s.rt.Logs(ctx, id, runtime.LogOptions{Tail: tail}); err != nil {
		fmt.Fprintf(&b, "(logs unavailable: %s)\n", fromRuntime(err, sandboxCodes, "").Message)
	} else if len(logs) == 0 {
		b.WriteString("(empty)\n")
	} else {
		b.Write(logs)
		if logs[len(logs)-1] != '\n' {
			b.WriteString("\n")
		}
	}
	writeLegacyText(w, b.String())
}

// writeDiagnostic sends text either as the legacy plain-text reply or, for
// a scoped request, as an inline descriptor.
func (s *Server) writeDiagnostic(w http.ResponseWriter, id, kind, scope string, scoped bool, text string) {
	if !scoped {
		writeLegacyText(w, text)
		return
	}
	d := diagnosticContent{
		SandboxID:   id,
		Kind:        kind,
		Scope:       scope,
		Delivery:    "inline",
		ContentType: textPlain,
		Warnings:    []string{},
	}
	if len(text) > maxInlineDiagnostic {
		text = text[len(text)-maxInlineDiagnostic:]
		if i := strings.IndexByte(text, '\n'); i >= 0 && i < len(text)-1 {
			text = text[i+1:] // start at a whole line
		}
		d.Truncated = true
	}
	d.Content, d.ContentLength = text, len(text)
	apierror.WriteJSON(w, http.StatusOK, d)
}

// writeLegacyText sends the deprecated plain-text form.
func writeLegacyText(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", textPlain)
	w.Header().Set("Deprecation", "true")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(text))
}

// formatEvents renders events one per line: "RFC3339 action message".
func formatEvents(events []runtime.Event) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Time.UTC().Format(time.RFC3339))
		b.WriteString(" ")
		b.WriteString(e.Action)
		if e.Message != "" {
			b.WriteString(" ")
			b.WriteString(e.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// parseScope reads the optional scope parameter; scoped reports whether
// it was given (asking for the JSON descriptor).
func parseScope(q url.Values) (scope string, scoped bool, err error) {
	v, ok := single(q, "scope")
	if !ok {
		return "", false, nil
	}
	scope = strings.ToLower(strings.TrimSpace(v))
	for _, known := range diagnosticScopes {
		if scope == known {
			return scope, true, nil
		}
	}
	return "", true, badRequest("scope %q is not served here; use one of: %s", v, strings.Join(diagnosticScopes, ", "))
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(q url.Values, key string, def, lo, hi int) (int, error) {
	v, ok := single(q, key)
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s %q must be an integer from %d to %d", key, v, lo, hi)
	}
	return n, nil
}

// parseSince reads since as a Go duration ("10m", "1h30m") or a number of
// seconds; absent means no bound.
func parseSince(q url.Values) (time.Duration, error) {
	v, ok := single(q, "since")
	if !ok || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseInt(v, 10, 64)
		if nerr != nil || n > int64(maxSince/time.Second) {
			return 0, badRequest("since %q must be a duration such as \"10m\" or \"2h\", or a number of seconds", v)
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 {
		return 0, badRequest("since %q must be positive", v)
	}
	return d, nil
}

// maxSince bounds since (ten years is "everything").
const maxSince = 10 * 365 * 24 * time.Hour
