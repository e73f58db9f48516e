//go:build linux

package isolation

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/opensandbox-go/opensandbox/internal/execd/command"
	"github.com/opensandbox-go/opensandbox/internal/execd/files"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
)

// runServe is the in-session server: execd's own command runner and files
// handler, on the listening socket the session was created with, running
// with the session's identity and seeing only the session's filesystem.
// execd proxies the session's /run and file endpoints to it.
func runServe() int {
	// The session's code runs with this process's identity: without
	// this it could ptrace it, read its memory (the requests execd passes
	// on) and use its descriptors through /proc (execd's stderr, the
	// sandbox's log stream). Commands it starts are dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "isolated session: not dumpable:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ws := os.Getenv(wsEnv)
	os.Unsetenv(wsEnv)
	// FileListener keeps a close-on-exec duplicate; the inherited
	// descriptor goes, or every command of the session would hold the
	// socket and could accept execd's requests in the server's place.
	lf := os.NewFile(fdListener, "listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		log.Error("isolated session: listener", "err", err)
		return 1
	}
	cmds, err := command.New(command.Options{Env: procenv.Builder{}, Logger: log})
	if err != nil {
		log.Error("isolated session: command runner", "err", err)
		return 1
	}
	fh := files.New(files.Options{BaseDir: ws, Logger: log})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /command", cmds.Run)
	mux.HandleFunc("GET /files/info", fh.Info)
	mux.HandleFunc("DELETE /files", fh.Remove)
	mux.HandleFunc("POST /files/permissions", fh.Chmod)
	mux.HandleFunc("POST /files/mv", fh.Move)
	mux.HandleFunc("GET /files/search", fh.Search)
	mux.HandleFunc("POST /files/replace", fh.Replace)
	mux.HandleFunc("POST /files/upload", fh.Upload)
	mux.HandleFunc("GET /files/download", fh.Download)
	mux.HandleFunc("GET /directories/list", fh.ListDir)
	mux.HandleFunc("POST /directories", fh.MakeDirs)
	mux.HandleFunc("DELETE /directories", fh.RemoveDirs)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// The session ends by SIGKILL of its init, which takes this process
	// with it; Serve returns only if the listener breaks.
	err = hs.Serve(ln)
	log.Error("isolated session: serve", "err", err)
	return 1
}
