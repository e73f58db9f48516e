package command

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// MaxLogChunk is the most one GET /command/{id}/logs returns; the cursor
// header tells the client where to continue.
const MaxLogChunk = 4 << 20

// ErrNotFound is returned by Interrupt for an unknown command id.
var ErrNotFound = errors.New("command not found")

// Status handles GET /command/status/{id}.
func (m *Manager) Status(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := m.Get(id)
	if !ok {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeCommandNotFound, "command %q not found", id))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, c.Status())
}

// Logs handles GET /command/{id}/logs?cursor=N: the combined output from
// byte offset N (default 0) on, as plain text, with the offset to continue
// from in the EXECD-COMMANDS-TAIL-CURSOR header. A cursor past the end is
// clamped to the end.
func (m *Manager) Logs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	c, ok := m.Get(id)
	if !ok {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeCommandNotFound, "command %q not found", id))
		return
	}
	var cursor int64
	if s := r.URL.Query().Get("cursor"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "cursor must be a non-negative integer, got %q", s))
			return
		}
		cursor = n
	}
	f, err := os.Open(c.logPath)
	if errors.Is(err, fs.ErrNotExist) {
		w.Header().Set(sandbox.CommandLogsCursorHeader, "0")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		return
	}
	if err != nil {
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "open log of command %s", id))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "stat log of command %s", id))
		return
	}
	size := st.Size()
	cursor = min(cursor, size)
	n := min(size-cursor, MaxLogChunk)
	w.Header().Set(sandbox.CommandLogsCursorHeader, strconv.FormatInt(cursor+n, 10))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	if n > 0 {
		io.Copy(w, io.NewSectionReader(f, cursor, n))
	}
}

// Interrupt ends the running command id. Interrupting a command that has
// already finished succeeds and changes nothing.
func (m *Manager) Interrupt(id string) error {
	c, ok := m.Get(id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	c.Interrupt("interrupted")
	return nil
}
