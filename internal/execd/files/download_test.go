package files

import (
	"bytes"
	"math/rand/v2"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

func TestDownload(t *testing.T) {
	e := newEnv(t)
	p := e.write("data.bin", "0123456789", 0o644)
	mtime := time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	lastMod := mtime.Format(http.TimeFormat)

	rep := e.do("GET", "/files/download"+q("path", "data.bin"), nil)
	if rep.status != 200 || string(rep.body) != "0123456789" {
		t.Fatalf("GET /files/download = %s, want 200 0123456789", rep)
	}
	for k, want := range map[string]string{
		"Content-Type":        "application/octet-stream",
		"Content-Length":      "10",
		"Accept-Ranges":       "bytes",
		"Last-Modified":       lastMod,
		"Content-Disposition": `attachment; filename="data.bin"`,
	} {
		if got := rep.header.Get(k); got != want {
			t.Errorf("GET /files/download header %s = %q, want %q", k, got, want)
		}
	}

	tests := []struct {
		rng, ifRange string
		status       int
		body         string
		contentRange string
	}{
		{rng: "bytes=2-5", status: 206, body: "2345", contentRange: "bytes 2-5/10"},
		{rng: "bytes=0-0", status: 206, body: "0", contentRange: "bytes 0-0/10"},
		{rng: "bytes=7-", status: 206, body: "789", contentRange: "bytes 7-9/10"},
		{rng: "bytes=-3", status: 206, body: "789", contentRange: "bytes 7-9/10"},
		{rng: "bytes=-20", status: 206, body: "0123456789", contentRange: "bytes 0-9/10"},
		{rng: "bytes=5-100", status: 206, body: "56789", contentRange: "bytes 5-9/10"},
		{rng: "BYTES= 1-2 ", status: 206, body: "12", contentRange: "bytes 1-2/10"},
		{rng: "bytes=3-4", ifRange: lastMod, status: 206, body: "34", contentRange: "bytes 3-4/10"},
		{rng: "bytes=10-", status: 416, contentRange: "bytes */10"},
		{rng: "bytes=99999999999999999999999-", status: 416, contentRange: "bytes */10"},
		{rng: "bytes=-0", status: 416, contentRange: "bytes */10"},
		{rng: "bytes=abc", status: 200, body: "0123456789"},
		{rng: "bytes=5-2", status: 200, body: "0123456789"},
		{rng: "bytes=0-1,3-4", status: 200, body: "0123456789"},
		{rng: "items=0-1", status: 200, body: "0123456789"},
		{rng: "bytes=", status: 200, body: "0123456789"},
		{rng: "bytes=+1-2", status: 200, body: "0123456789"},
		{rng: "bytes=3-4", ifRange: `"etag"`, status: 200, body: "0123456789"},
	}
	for _, tt := range tests {
		call := "GET /files/download Range: " + tt.rng
		hdr := []string{"Range", tt.rng}
		if tt.ifRange != "" {
			hdr = append(hdr, "If-Range", tt.ifRange)
		}
		rep := e.do("GET", "/files/download"+q("path", p), nil, hdr...)
		if got := rep.header.Get("Content-Range"); got != tt.contentRange {
			t.Errorf("%s: Content-Range = %q, want %q", call, got, tt.contentRange)
		}
		if tt.status == 416 {
			wantErr(t, call, rep, 416, apierror.CodeInvalidRange, "not satisfiable")
			continue
		}
		if rep.status != tt.status || string(rep.body) != tt.body {
			t.Errorf("%s = %s, want %d %q", call, rep, tt.status, tt.body)
		}
		if got, want := rep.header.Get("Content-Length"), len(tt.body); got != strconv.Itoa(want) {
			t.Errorf("%s: Content-Length = %s, want %d", call, got, want)
		}
	}
}

func TestDownloadEdgeCases(t *testing.T) {
	e := newEnv(t)
	empty := e.write("empty", "", 0o644)
	rep := e.do("GET", "/files/download"+q("path", empty), nil)
	if rep.status != 200 || len(rep.body) != 0 || rep.header.Get("Content-Length") != "0" {
		t.Errorf("download empty file = %s (Content-Length %q), want 200 empty", rep, rep.header.Get("Content-Length"))
	}
	rep = e.do("GET", "/files/download"+q("path", empty), nil, "Range", "bytes=0-")
	wantErr(t, "download empty file with range", rep, 416, apierror.CodeInvalidRange, "0 bytes")
	if got := rep.header.Get("Content-Range"); got != "bytes */0" {
		t.Errorf("416 Content-Range = %q, want bytes */0", got)
	}

	// Non-ASCII and quoting: an ASCII fallback plus filename*.
	name := "résumé \"v2\".txt"
	p := e.write(name, "cv", 0o644)
	rep = e.do("GET", "/files/download"+q("path", p), nil)
	cd := rep.header.Get("Content-Disposition")
	want := `attachment; filename="r__sum__ _v2_.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%22v2%22.txt`
	if cd != want {
		t.Errorf("Content-Disposition = %q, want %q", cd, want)
	}
	if _, params, err := mime.ParseMediaType(cd); err != nil || params["filename"] != name {
		t.Errorf("mime.ParseMediaType(%q) filename = %q, %v; want %q", cd, params["filename"], err, name)
	}

	// A large file, ranged from the middle, streams exactly.
	data := make([]byte, 3<<20+17)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rnd.Uint32())
	}
	big := filepath.Join(e.dir, "big")
	if err := os.WriteFile(big, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep = e.do("GET", "/files/download"+q("path", big), nil, "Range", "bytes=1000-2000000")
	if rep.status != 206 || !bytes.Equal(rep.body, data[1000:2000001]) {
		t.Errorf("ranged download of big file = %d, %d bytes; want 206 with bytes 1000-2000000", rep.status, len(rep.body))
	}
	rep = e.do("GET", "/files/download"+q("path", big), nil)
	if rep.status != 200 || !bytes.Equal(rep.body, data) {
		t.Errorf("download of big file = %d, %d bytes; want 200 with all %d", rep.status, len(rep.body), len(data))
	}

	// HEAD matches the GET pattern and sends headers only.
	rep = e.do("HEAD", "/files/download"+q("path", big), nil)
	if rep.status != 200 || len(rep.body) != 0 || rep.header.Get("Content-Length") != strconv.Itoa(len(data)) {
		t.Errorf("HEAD /files/download = %s (Content-Length %q), want 200, no body, length %d", rep, rep.header.Get("Content-Length"), len(data))
	}
}

func TestDownloadErrors(t *testing.T) {
	e := newEnv(t)
	d := e.mkdir("d")
	fifo := filepath.Join(e.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query  string
		status int
		code   string
		frag   string
	}{
		{"", 400, apierror.CodeMissingQuery, "path"},
		{q("path", "missing"), 404, apierror.CodeFileNotFound, "missing"},
		{q("path", d), 400, apierror.CodeIsDirectory, d},
		{q("path", fifo), 400, apierror.CodeInvalidFile, "not a regular file"},
		{q("path", ""), 400, apierror.CodeInvalidPath, "empty"},
	}
	for _, tt := range tests {
		call := "GET /files/download" + tt.query
		rep := e.do("GET", "/files/download"+tt.query, nil)
		wantErr(t, call, rep, tt.status, tt.code, tt.frag)
		if cd := rep.header.Get("Content-Disposition"); cd != "" {
			t.Errorf("%s: error reply carries Content-Disposition %q", call, cd)
		}
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		h             string
		size          int64
		start, length int64
		res           rangeResult
	}{
		{"bytes=0-499", 1000, 0, 500, rangeOK},
		{"bytes=500-", 1000, 500, 500, rangeOK},
		{"bytes=-500", 1000, 500, 500, rangeOK},
		{"bytes=999-999", 1000, 999, 1, rangeOK},
		{"bytes=1000-1000", 1000, 0, 0, rangeUnsatisfiable},
		{"bytes=-1", 0, 0, 0, rangeUnsatisfiable},
		{"bytes=0-", 0, 0, 0, rangeUnsatisfiable},
		{"bytes=0-9223372036854775807", 5, 0, 5, rangeOK},
		{"bytes=1-2-3", 5, 0, 0, rangeIgnore},
		{"bytes=-", 5, 0, 0, rangeIgnore},
		{"bytes 0-1", 5, 0, 0, rangeIgnore},
		{"bytes=0x1-2", 5, 0, 0, rangeIgnore},
		{"", 5, 0, 0, rangeIgnore},
	}
	for _, tt := range tests {
		s, l, res := parseRange(tt.h, tt.size)
		if s != tt.start || l != tt.length || res != tt.res {
			t.Errorf("parseRange(%q, %d) = %d, %d, %d; want %d, %d, %d", tt.h, tt.size, s, l, res, tt.start, tt.length, tt.res)
		}
	}
}
