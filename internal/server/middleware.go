package server

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/httpmw"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// maxRequestIDLen bounds an inbound X-Request-ID we are willing to echo.
const maxRequestIDLen = 128

type loggerKey struct{}

// logFrom returns the request-scoped logger stored in ctx (it carries the
// request id), or fallback when there is none.
func logFrom(ctx context.Context, fallback *slog.Logger) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return fallback
}

// reqLog is the logger of request r.
func (s *Server) reqLog(r *http.Request) *slog.Logger { return logFrom(r.Context(), s.log) }

// withRequestID gives every request an id: the caller's X-Request-ID when
// it is sane, a fresh one otherwise. The id goes on every response
// (before any handler runs, so errors and 404s carry it too) and into the
// request's logger.
func (s *Server) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(sandbox.RequestIDHeader)
		if !saneRequestID(id) {
			id = newRequestID()
			r.Header.Set(sandbox.RequestIDHeader, id)
		}
		w.Header().Set(sandbox.RequestIDHeader, id)
		log := s.log.With(slog.String(httpmw.RequestIDKey, id))
		ctx := httpmw.WithRequestID(context.WithValue(r.Context(), loggerKey{}, log), id)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// saneRequestID accepts 1 to 128 printable ASCII characters.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// newRequestID is a fresh random UUID (lifecycle.NewUUID, the one
// generator of ids) in 32 hex digits.
func newRequestID() string {
	return strings.ReplaceAll(lifecycle.NewUUID(), "-", "")
}

// requireAPIKey checks OPEN-SANDBOX-API-KEY in constant time. With no key
// configured it lets everything through.
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkAPIKey(r, ""); err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkAPIKey returns the 401 for a request without the configured API key
// (nil when none is configured); why, when set, starts the message.
func (s *Server) checkAPIKey(r *http.Request, why string) error {
	if s.cfg.APIKey == "" {
		return nil
	}
	got, ok := r.Header[http.CanonicalHeaderKey(sandbox.APIKeyHeader)]
	if !ok || len(got) == 0 || got[0] == "" {
		return apierror.New(http.StatusUnauthorized, apierror.CodeMissingAPIKey,
			"%smissing API key: send it in the %s header", why, sandbox.APIKeyHeader)
	}
	if subtle.ConstantTimeCompare([]byte(got[0]), []byte(s.cfg.APIKey)) != 1 {
		return apierror.New(http.StatusUnauthorized, apierror.CodeInvalidAPIKey, "%sinvalid API key", why)
	}
	return nil
}

// recoverPanics turns a handler panic into a 500 for that request only.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return httpmw.Recover(next, func(w http.ResponseWriter, r *http.Request, v any) {
		s.reqLog(r).Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
		s.writeError(w, r, apierror.New(http.StatusInternalServerError, apierror.CodeInternal, "internal error"))
	})
}

// logRequests logs one line per request: reads at debug, changes at info,
// server errors at warn.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &httpmw.StatusRecorder{ResponseWriter: w}
		defer func() {
			// An aborted reply (a proxied stream cut by the sandbox) is
			// logged too, then the abort goes on to net/http.
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					level := slog.LevelWarn
					if r.Context().Err() != nil {
						level = slog.LevelDebug // the client went away first
					}
					s.reqLog(r).LogAttrs(r.Context(), level, "request aborted",
						slog.String("method", r.Method), slog.String("path", r.URL.Path),
						slog.Int("status", rec.Status), slog.Duration("duration", time.Since(start)))
				}
				panic(v)
			}
		}()
		next.ServeHTTP(rec, r)
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		level := slog.LevelInfo
		switch {
		case serverFault(rec.Status):
			level = slog.LevelWarn
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			level = slog.LevelDebug
		}
		s.reqLog(r).LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", rec.Status), slog.Duration("duration", time.Since(start)))
	})
}
