package files

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// lineWindow selects lines of a text file: Limit lines starting at line
// Offset (1-based); Limit 0 means to the end of the file.
type lineWindow struct {
	Offset, Limit int64
}

// parseLineWindow reads the offset/limit query parameters of a line-based
// download (newer SDKs send them for readFile with offset/limit). It returns
// nil when neither is present. They cannot be combined with Range.
func parseLineWindow(r *http.Request) (*lineWindow, error) {
	q := r.URL.Query()
	if !q.Has("offset") && !q.Has("limit") {
		return nil, nil
	}
	if r.Header.Get("Range") != "" {
		return nil, apierror.BadRequest(apierror.CodeInvalidQuery, "offset/limit and the Range header cannot be used together")
	}
	win := lineWindow{Offset: 1}
	for _, p := range []struct {
		name string
		dst  *int64
		min  int64
	}{{"offset", &win.Offset, 1}, {"limit", &win.Limit, 1}} {
		if !q.Has(p.name) {
			continue
		}
		n, err := strconv.ParseInt(q.Get(p.name), 10, 64)
		if err != nil || n < p.min {
			return nil, apierror.BadRequest(apierror.CodeInvalidQuery, "%s must be an integer >= %d, got %q", p.name, p.min, q.Get(p.name))
		}
		*p.dst = n
	}
	return &win, nil
}

// downloadLines streams the selected lines as text/plain, each with its
// line terminator; lines past the end of the file are simply absent.
func (h *Handler) downloadLines(w http.ResponseWriter, r *http.Request, f *os.File, abs string, win lineWindow) {
	br := bufio.NewReaderSize(f, 64<<10)
	skip := func() error {
		for i := int64(1); i < win.Offset; i++ {
			for {
				_, err := br.ReadSlice('\n')
				if err == nil {
					break
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					return err
				}
			}
		}
		return nil
	}
	if err := skip(); err != nil && !errors.Is(err, io.EOF) {
		apierror.Write(w, r, fsError(err, "download", abs))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	for n := int64(0); win.Limit == 0 || n < win.Limit; n++ {
		line, err := br.ReadBytes('\n')
		bw.Write(line)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				h.log.LogAttrs(r.Context(), slog.LevelDebug, "line download cut short", slog.String("path", abs), slog.Any("err", err))
			}
			return
		}
	}
}
