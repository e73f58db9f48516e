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
	data, next, err := c.readLog(cursor, MaxLogChunk)
	if err != nil {
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "read log of command %s", id))
		return
	}
	w.Header().Set(sandbox.CommandLogsCursorHeader, strconv.FormatInt(next, 10))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// readLog returns up to max bytes of c's output from offset on, and the
// offset after them.
func (c *Command) readLog(offset, max int64) ([]byte, int64, error) {
	if c.log != nil {
		return c.log.Read(offset, max)
	}
	f, err := os.Open(c.logPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, offset, err
	}
	offset = min(offset, st.Size())
	n := min(st.Size()-offset, max)
	buf := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(f, offset, n), buf); err != nil {
		return nil, offset, err
	}
	return buf, offset + n, nil
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
