package isolation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const (
	profileStrict   = sandbox.IsolationStrict
	profileBalanced = sandbox.IsolationBalanced
	modeRW          = sandbox.WorkspaceRW
	modeRO          = sandbox.WorkspaceRO
	modeOverlay     = sandbox.WorkspaceOverlay
)

// Options configure a Manager. Zero fields take the documented defaults.
type Options struct {
	// Exe is the execd binary that is re-executed as each session's init;
	// default /proc/self/exe.
	Exe string
	// Env builds the environment sessions choose their variables from
	// (see env_passthrough).
	Env procenv.Builder
	// ReadyTimeout bounds how long a session's setup may take; default 15s.
	ReadyTimeout time.Duration
	// MaxJSONBody caps request bodies; default 1 MiB.
	MaxJSONBody int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ErrNotFound is returned for an unknown session id.
var ErrNotFound = errors.New("isolated session not found")

// Manager owns the isolated sessions of execd and serves /v1/isolated.
type Manager struct {
	opts Options
	log  *slog.Logger

	capsOnce sync.Once
	caps     sandbox.IsolatedCapabilities

	baseOnce sync.Once
	base     string
	baseErr  error

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool

	wg   sync.WaitGroup // session waiters and the idle reaper
	stop chan struct{}
	kick chan struct{} // wakes the reaper when an idle deadline may have changed
}

// New returns a Manager and starts its idle reaper; Close stops both.
func New(opts Options) *Manager {
	if opts.Exe == "" {
		opts.Exe = "/proc/self/exe"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 15 * time.Second
	}
	if opts.MaxJSONBody <= 0 {
		opts.MaxJSONBody = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &Manager{opts: opts, log: opts.Logger, sessions: map[string]*session{}, stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	m.wg.Add(1)
	go m.reapIdle()
	return m
}

// session is one isolated session.
type session struct {
	id      string
	params  sandbox.IsolatedSessionParams
	spec    initSpec
	created time.Time
	idle    time.Duration
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the init has exited and its files are gone
	ending  bool          // end was called; guarded by Manager.mu
	client  *http.Client
	proxy   *httputil.ReverseProxy

	mu         sync.Mutex
	lastRun    *time.Time
	lastActive time.Time
	inFlight   int
}

// touch marks a request into the session as started (delta 1) or ended (-1).
func (s *session) touch(delta int, run bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.inFlight += delta
	s.lastActive = now
	if run && delta > 0 {
		s.lastRun = &now
	}
}

// idleRemainingExact is how long s may still stay idle: 0 with gone true
// once its timeout has passed, 0 with gone false while it has no timeout
// or a request in flight (the end of the request kicks the reaper).
func (s *session) idleRemainingExact(now time.Time) (left time.Duration, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle <= 0 || s.inFlight > 0 {
		return 0, false
	}
	left = s.idle - now.Sub(s.lastActive)
	if left <= 0 {
		return 0, true
	}
	return left, false
}

// idleRemaining is nil without an idle timeout.
func (s *session) idleRemaining(now time.Time) (*int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idle <= 0 {
		return nil, false
	}
	left := s.idle - now.Sub(s.lastActive)
	if s.inFlight > 0 {
		left = s.idle
	}
	secs := int(left.Round(time.Second) / time.Second)
	if secs < 0 {
		secs = 0
	}
	return &secs, s.inFlight == 0 && left <= 0
}

// Capabilities handles GET /v1/isolated/capabilities.
func (m *Manager) Capabilities(w http.ResponseWriter, r *http.Request) {
	apierror.WriteJSON(w, http.StatusOK, m.capabilities())
}

func (m *Manager) capabilities() sandbox.IsolatedCapabilities {
	m.capsOnce.Do(func() { m.caps = m.probe() })
	return m.caps
}

// scratch is the private directory holding each session's mount staging
// directories and server socket.
func (m *Manager) scratch() (string, error) {
	m.baseOnce.Do(func() { m.base, m.baseErr = mkdirBase() })
	return m.base, m.baseErr
}

// baseCandidates are where execd's isolation directory may go, in order of
// preference.
var baseCandidates = []string{"/tmp", "/var/tmp", "/dev/shm", "/run"}

// mkdirBase creates execd's private isolation directory. It holds every
// session's server socket, which can be connected to even through a
// read-only mount, so it must not be inside a directory that sessions see
// (systemDirs, balancedDirs), wherever TMPDIR (the sandbox's environment,
// set by the client) or a link in the image points: such candidates are
// passed over.
func mkdirBase() (string, error) {
	var firstErr error
	for _, d := range append([]string{os.TempDir()}, baseCandidates...) {
		real, err := filepath.EvalSymlinks(d)
		if err == nil && sessionVisible(real) {
			err = fmt.Errorf("%s is %s, which isolated sessions see", d, real)
		}
		if err == nil {
			var dir string
			if dir, err = os.MkdirTemp(real, "execd-isolation-"); err == nil {
				return dir, nil
			}
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return "", fmt.Errorf("no place for the isolation directory outside what sessions see: %w", firstErr)
}

// sessionVisible reports whether the resolved path p is inside a directory
// that sessions get mounted.
func sessionVisible(p string) bool {
	for _, d := range append(append([]string(nil), systemDirs...), balancedDirs...) {
		if within(p, d) {
			return true
		}
	}
	return false
}

// Create handles POST /v1/isolated/session.
func (m *Manager) Create(w http.ResponseWriter, r *http.Request) {
	var req sandbox.CreateIsolatedSessionRequest
	if err := apierror.DecodeJSON(w, r, m.opts.MaxJSONBody, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	caps := m.capabilities()
	if !caps.Available {
		apierror.Write(w, r, apierror.New(http.StatusServiceUnavailable, apierror.CodeNotSupported, "isolated execution is not available in this sandbox: %s", caps.Message))
		return
	}
	s, err := m.newSession(&req, caps)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if err := m.launch(r.Context(), s); err != nil {
		apierror.Write(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, sandbox.IsolatedSessionInfo{
		SessionID: s.id, CreatedAt: s.created, IsolatedSessionParams: s.params,
	})
}

// newSession validates req into a session that is not started yet.
func (m *Manager) newSession(req *sandbox.CreateIsolatedSessionRequest, caps sandbox.IsolatedCapabilities) (*session, error) {
	bad := func(format string, args ...any) error {
		return apierror.BadRequest(apierror.CodeInvalidRequestBody, format, args...)
	}
	base, err := m.scratch()
	if err != nil {
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "isolation scratch directory")
	}
	id := newID()
	spec := initSpec{ID: id, Profile: req.Profile, Mode: req.Workspace.Mode, ShareNet: req.ShareNet}
	switch spec.Profile {
	case "":
		spec.Profile = profileStrict
	case profileStrict, profileBalanced:
	default:
		return nil, bad("profile %q: want strict or balanced", req.Profile)
	}
	switch spec.Mode {
	case "":
		spec.Mode = modeRW
	case modeRW, modeRO, modeOverlay:
	default:
		return nil, bad("workspace.mode %q: want rw, overlay or ro", req.Workspace.Mode)
	}
	ws, err := cleanAbs("workspace.path", req.Workspace.Path)
	if err != nil {
		return nil, bad("%v", err)
	}
	if within(ws, base) || within(base, ws) {
		return nil, bad("workspace.path %q overlaps execd's private isolation directory", ws)
	}
	if err := checkSource("workspace.path", ws, base); err != nil {
		return nil, bad("%v", err)
	}
	if err := checkPrivate("workspace.path", ws); err != nil {
		return nil, bad("%v", err)
	}
	spec.Workspace = ws
	addBind := func(what, src, dest string, ro bool) error {
		src, err := cleanAbs(what+".source", src)
		if err != nil {
			return bad("%v", err)
		}
		if dest == "" {
			dest = src
		}
		if dest, err = cleanAbs(what+".dest", dest); err != nil {
			return bad("%v", err)
		}
		if dest == ws || within(ws, dest) {
			return bad("%s.dest %q would cover the workspace", what, dest)
		}
		if err := checkSource(what+".source", src, base); err != nil {
			return bad("%v", err)
		}
		if _, err := os.Stat(src); err != nil {
			return bad("%s.source %q: %v", what, src, err)
		}
		if !ro {
			if err := checkPrivate(what+".source", src); err != nil {
				return bad("%v", err)
			}
		}
		spec.Binds = append(spec.Binds, bind{Source: src, Dest: dest, RO: ro})
		return nil
	}
	for i, p := range req.ExtraWritable {
		if err := addBind(fmt.Sprintf("extra_writable[%d]", i), p, p, false); err != nil {
			return nil, err
		}
	}
	for i, b := range req.Binds {
		if err := addBind(fmt.Sprintf("binds[%d]", i), b.Source, b.Dest, b.ReadOnly); err != nil {
			return nil, err
		}
	}
	switch req.UIDMode {
	case "", sandbox.UIDModeSetpriv:
		if !caps.SetprivAvailable {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.CodeNotSupported, "uid_mode setpriv is not available here (execd is not root); use uid_mode userns")
		}
	case sandbox.UIDModeUserns:
		if !caps.UsernsAvailable {
			return nil, apierror.New(http.StatusServiceUnavailable, apierror.CodeNotSupported, "uid_mode userns is not available here")
		}
		spec.Userns = true
	default:
		return nil, bad("uid_mode %q: want setpriv or userns", req.UIDMode)
	}
	spec.UID, spec.GID = uint32(os.Geteuid()), uint32(os.Getegid())
	if req.UID != nil {
		spec.UID, spec.GID = *req.UID, *req.UID
	}
	if req.GID != nil {
		spec.GID = *req.GID
	}
	if req.IdleTimeoutSeconds < 0 {
		return nil, bad("idle_timeout_seconds must be >= 0, got %d", req.IdleTimeoutSeconds)
	}
	env, err := m.sessionEnv(req.EnvPassthrough, ws)
	if err != nil {
		return nil, err
	}
	spec.Env = env
	// Last, once the request is known to be good: the workspace may be
	// new. It is made along the path as resolved and checked here.
	real := resolveExisting(ws)
	if err := checkOpened("workspace.path", ws, real, base, true); err != nil {
		return nil, bad("%v", err)
	}
	if err := mkdirChecked(real); err != nil {
		return nil, bad("workspace.path %q: %v", ws, err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, bad("workspace.path %q is not a directory", ws)
	}
	spec.Hostname = "isolated-" + id[len(id)-8:]
	spec.Base = base
	spec.Root = filepath.Join(base, id, "root")
	spec.Scratch = filepath.Join(base, id, "scratch")

	mode := spec.Mode
	uidMode := sandbox.UIDModeSetpriv
	if spec.Userns {
		uidMode = sandbox.UIDModeUserns
	}
	uid, gid := spec.UID, spec.GID
	now := time.Now().UTC()
	return &session{
		id:   id,
		spec: spec,
		params: sandbox.IsolatedSessionParams{
			Profile:            spec.Profile,
			Workspace:          &sandbox.IsolatedWorkspace{Path: ws, Mode: mode},
			ExtraWritable:      req.ExtraWritable,
			Binds:              req.Binds,
			ShareNet:           spec.ShareNet,
			EnvPassthrough:     req.EnvPassthrough,
			UID:                &uid,
			GID:                &gid,
			UIDMode:            uidMode,
			IdleTimeoutSeconds: req.IdleTimeoutSeconds,
		},
		created:    now,
		idle:       time.Duration(req.IdleTimeoutSeconds) * time.Second,
		exited:     make(chan struct{}),
		lastActive: now,
	}, nil
}

// safeEnv are the variables a session gets without an env_passthrough.
var safeEnv = []string{"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TERM", "TZ"}

// sessionEnv picks the session's environment from execd's: the safe set
// by default, the safe set plus keys for mode allow, everything but keys
// for mode deny. HOME is the workspace.
func (m *Manager) sessionEnv(pt *sandbox.EnvPassthrough, ws string) ([]string, error) {
	all, err := m.opts.Env.Environ(nil)
	if err != nil {
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "build session environment")
	}
	pass := map[string]bool{}
	for _, k := range safeEnv {
		pass[k] = true
	}
	deny := false
	if pt != nil {
		switch pt.Mode {
		case "", "allow":
		case "deny":
			deny = true
		default:
			return nil, apierror.BadRequest(apierror.CodeInvalidRequestBody, "env_passthrough.mode %q: want allow or deny", pt.Mode)
		}
		for _, k := range pt.Keys {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, apierror.BadRequest(apierror.CodeInvalidRequestBody, "env_passthrough.keys: invalid name %q", k)
			}
			pass[k] = !deny
		}
	}
	var env []string
	for _, kv := range all {
		k, _, _ := strings.Cut(kv, "=")
		keep, listed := pass[k]
		if deny {
			keep = !listed || keep
		}
		if keep && k != "HOME" {
			env = append(env, kv)
		}
	}
	if procenv.Lookup(env, "PATH") == "" {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return append(env, "HOME="+ws), nil
}

// launch starts s's init, waits for its setup and registers it.
func (m *Manager) launch(ctx context.Context, s *session) error {
	for _, d := range []string{s.spec.Root, s.spec.Scratch} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "create session directories")
		}
	}
	dir := filepath.Dir(s.spec.Root)
	sock := filepath.Join(dir, "server.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "session socket")
	}
	lnFile, err := ln.File()
	ln.SetUnlinkOnClose(false) // the socket stays for the session's server
	ln.Close()
	if err != nil {
		os.RemoveAll(dir)
		return apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "session socket")
	}
	cmd, err := m.start(ctx, s.spec, lnFile)
	lnFile.Close()
	if err != nil {
		os.RemoveAll(dir)
		return apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "start isolated session: %v", err)
	}
	s.cmd = cmd
	tr, proxy := sessionProxy(s.id, sock)
	s.client = &http.Client{Transport: tr}
	s.proxy = proxy
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
		return apierror.New(http.StatusServiceUnavailable, apierror.CodeServiceDraining, "execd is shutting down")
	}
	m.sessions[s.id] = s
	m.wg.Add(1)
	m.mu.Unlock()
	m.kickReaper()
	go func() {
		defer m.wg.Done()
		err := cmd.Wait()
		m.mu.Lock()
		if m.sessions[s.id] == s {
			delete(m.sessions, s.id)
		}
		m.mu.Unlock()
		tr.CloseIdleConnections()
		os.RemoveAll(dir)
		m.log.Debug("isolated session ended", "session", s.id, "err", err)
		close(s.exited)
	}()
	return nil
}

// proxiedHeaders are the only request headers the session's file
// endpoints pass to its server: what the file API reads. Everything else
// stays out, above all execd's access token (which the lifecycle server's
// proxy adds to every request) and any other credential: the server runs
// with the session's identity, where the session's code can read it.
var proxiedHeaders = []string{"Content-Type", "Content-Length", "Range", "If-Range", "Accept"}

// sessionProxy returns the transport to the session server listening on
// sock and the reverse proxy of its file endpoints.
func sessionProxy(id, sock string) (*http.Transport, *httputil.ReverseProxy) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 8,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "session", "session"
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/v1/isolated/session/"+id)
			pr.Out.URL.RawPath = ""
			h := http.Header{}
			for _, k := range proxiedHeaders {
				if v, ok := pr.Out.Header[k]; ok {
					h[k] = v
				}
			}
			pr.Out.Header = h
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			apierror.Write(w, r, apierror.Wrap(err, http.StatusBadGateway, apierror.CodeBadGateway, "isolated session %s did not answer", id))
		},
	}
	return tr, proxy
}

// List handles GET /v1/isolated/sessions.
func (m *Manager) List(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].created.Before(all[j].created) })
	now := time.Now()
	out := sandbox.ListIsolatedSessionsResponse{Sessions: []sandbox.IsolatedSessionSummary{}}
	for _, s := range all {
		left, _ := s.idleRemaining(now)
		s.mu.Lock()
		out.Sessions = append(out.Sessions, sandbox.IsolatedSessionSummary{
			SessionID: s.id, Status: sandbox.IsolatedActive, CreatedAt: s.created,
			LastRunAt: s.lastRun, IdleRemainingSeconds: left,
		})
		s.mu.Unlock()
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

// Get handles GET /v1/isolated/session/{sessionId}.
func (m *Manager) Get(w http.ResponseWriter, r *http.Request) {
	s, ok := m.lookup(w, r)
	if !ok {
		return
	}
	left, _ := s.idleRemaining(time.Now())
	s.mu.Lock()
	st := sandbox.IsolatedSessionState{
		Status: sandbox.IsolatedActive, CreatedAt: s.created, LastRunAt: s.lastRun,
		IdleRemainingSeconds: left, IsolatedSessionParams: s.params,
	}
	s.mu.Unlock()
	apierror.WriteJSON(w, http.StatusOK, st)
}

// Delete handles DELETE /v1/isolated/session/{sessionId}: it kills every
// process of the session and answers once they are gone.
func (m *Manager) Delete(w http.ResponseWriter, r *http.Request) {
	s, ok := m.lookup(w, r)
	if !ok {
		return
	}
	m.end(s)
	select {
	case <-s.exited:
		w.WriteHeader(http.StatusOK)
	case <-r.Context().Done():
	}
}

// end kills s's init; the pid namespace goes with it. The session stays
// in the table (its GET answers) until the waiter has reaped the init,
// which the kernel lets happen only after every other process of the
// namespace is gone: a 404 means nothing of the session runs any more.
func (m *Manager) end(s *session) {
	m.mu.Lock()
	s.ending = true
	m.mu.Unlock()
	s.cmd.Process.Signal(syscall.SIGKILL)
}

func (m *Manager) lookup(w http.ResponseWriter, r *http.Request) (*session, bool) {
	id := r.PathValue("sessionId")
	m.mu.Lock()
	s, ok := m.sessions[id]
	m.mu.Unlock()
	if !ok {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeSessionNotFound, "isolated session %q not found", id))
	}
	return s, ok
}

// lookupLive is lookup for requests into the session: one being ended
// takes no more work.
func (m *Manager) lookupLive(w http.ResponseWriter, r *http.Request) (*session, bool) {
	s, ok := m.lookup(w, r)
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	ending := s.ending
	m.mu.Unlock()
	if ending {
		apierror.Write(w, r, apierror.NotFound(apierror.CodeSessionNotFound, "isolated session %q is being ended", s.id))
		return nil, false
	}
	return s, true
}

// Run handles POST /v1/isolated/session/{sessionId}/run: the code runs in
// the session through its server's command runner, and the event stream
// comes back unchanged (the /command frame format).
func (m *Manager) Run(w http.ResponseWriter, r *http.Request) {
	s, ok := m.lookupLive(w, r)
	if !ok {
		return
	}
	var req sandbox.IsolatedRunRequest
	if err := apierror.DecodeJSON(w, r, m.opts.MaxJSONBody, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "code is required"))
		return
	}
	if req.TimeoutSeconds < 0 {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "timeout_seconds must be >= 0, got %d", req.TimeoutSeconds))
		return
	}
	body, _ := jsonBody(sandbox.RunCommandRequest{
		Command: req.Code, Cwd: s.spec.Workspace, Envs: req.Envs, Timeout: req.TimeoutSeconds * 1000,
	})
	s.touch(1, true)
	defer m.kickReaper()
	defer s.touch(-1, true)
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://session/command", body)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	out.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(out)
	if err != nil {
		if r.Context().Err() == nil {
			apierror.Write(w, r, apierror.Wrap(err, http.StatusBadGateway, apierror.CodeBadGateway, "isolated session %s did not answer", s.id))
		}
		return
	}
	defer resp.Body.Close()
	copyStream(w, resp)
}

// Files handles the session's /files and /directories endpoints by
// passing them to the in-session server, which sees the session's view of
// the filesystem and acts with the session's identity.
func (m *Manager) Files(w http.ResponseWriter, r *http.Request) {
	s, ok := m.lookupLive(w, r)
	if !ok {
		return
	}
	s.touch(1, false)
	defer m.kickReaper()
	defer s.touch(-1, false)
	s.proxy.ServeHTTP(w, r)
}

// NotSupported handles diff and commit, which this execd does not offer
// (capabilities says so).
func (m *Manager) NotSupported(w http.ResponseWriter, r *http.Request) {
	if _, ok := m.lookup(w, r); !ok {
		return
	}
	apierror.Write(w, r, apierror.New(http.StatusServiceUnavailable, apierror.CodeNotSupported, "%s is not supported by this execd", filepath.Base(r.URL.Path)))
}

// reapIdle ends sessions whose idle timeout has passed with no request in
// flight. It sleeps until the earliest such deadline, or until kicked, and
// not at all while no session has an idle timeout.
func (m *Manager) reapIdle() {
	defer m.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-m.stop:
			timer.Stop()
			return
		case <-m.kick:
		case <-timer.C:
		}
		now := time.Now()
		var expired []*session
		var next time.Duration
		m.mu.Lock()
		for _, s := range m.sessions {
			if s.ending {
				continue
			}
			left, gone := s.idleRemainingExact(now)
			switch {
			case gone:
				expired = append(expired, s)
			case left > 0 && (next == 0 || left < next):
				next = left
			}
		}
		m.mu.Unlock()
		for _, s := range expired {
			m.log.Info("isolated session idle timeout", "session", s.id, "idle", s.idle)
			m.end(s)
		}
		timer.Stop()
		if next > 0 {
			timer.Reset(next)
		}
	}
}

// kickReaper makes the reaper look at the sessions again.
func (m *Manager) kickReaper() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Close ends every session and the reaper, and waits for them.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
	}
	all := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		m.end(s)
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if m.base != "" {
		os.RemoveAll(m.base)
	}
	return nil
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
