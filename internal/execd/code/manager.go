// Package code is execd's code interpreter (/code API): stateful contexts,
// each owning one interpreter process, that run cells and stream their
// output as execution events.
//
// Python contexts run a real ipykernel that execd starts itself and drives
// over the Jupyter messaging protocol (ZeroMQ through the pure-Go zmq4, so
// execd stays cgo-free). JavaScript contexts run a small Node.js driver
// embedded in execd that evaluates cells in one persistent vm context.
// Bash contexts are persistent shells from the session package. Java
// contexts run an embedded Java driver (Driver.java) over the JShell API,
// speaking the JavaScript driver's protocol. Go contexts keep declarations
// and compile and run statements cells and whole programs (golang.go).
// TypeScript contexts run the JavaScript driver, which transpiles each cell
// with the image's typescript module (typescript.go).
package code

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Options configure a Manager.
type Options struct {
	// Env builds the environment of every interpreter.
	Env procenv.Builder
	// StartTimeout bounds how long an interpreter may take to become
	// ready; default 30s.
	StartTimeout time.Duration
	// InterruptGrace is how long an interrupted run may take to end
	// before its interpreter is killed (and restarted without its state);
	// default 3s.
	InterruptGrace time.Duration
	// MaxJSONBody caps request bodies; default 1 MiB.
	MaxJSONBody int64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// ErrNotFound is returned for an unknown context id.
var ErrNotFound = errors.New("code context not found")

// Manager owns the code contexts.
type Manager struct {
	opts Options
	log  *slog.Logger
	det  detector

	mu       sync.Mutex
	contexts map[string]*codeContext
	order    []string          // creation order, for listings
	defaults map[string]string // language -> id of its default context
	closed   bool
}

// New returns a Manager.
func New(opts Options) *Manager {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.InterruptGrace <= 0 {
		opts.InterruptGrace = 3 * time.Second
	}
	if opts.MaxJSONBody <= 0 {
		opts.MaxJSONBody = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts, log: opts.Logger, contexts: map[string]*codeContext{}, defaults: map[string]string{}}
}

// newContext checks the language and directory and builds (but does not
// start) a context.
func (m *Manager) newContext(lang, cwd string) (*codeContext, error) {
	env, err := m.opts.Env.Environ(nil)
	if err != nil {
		return nil, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "build interpreter environment")
	}
	start, ok := starters[lang]
	if ok {
		_, err = m.det.interpreter(lang, env)
	}
	if !ok || err != nil {
		avail := m.det.available(env)
		why := ""
		if errors.Is(err, errNoTypeScript) {
			why = " (" + strings.TrimPrefix(err.Error(), errUnsupported.Error()+": ") + ")"
		}
		return nil, apierror.BadRequest(apierror.CodeNotSupported, "language %q is not supported here%s; available: %s", lang, why, strings.Join(avail, ", "))
	}
	dir, err := procenv.ResolveDir(cwd, env)
	if err != nil {
		return nil, apierror.BadRequest(apierror.CodeInvalidRequestBody, "%v", err)
	}
	return &codeContext{
		id:       newID(),
		language: lang,
		cwd:      cwd,
		dir:      dir,
		start:    func(ctx context.Context, c *codeContext) (runner, error) { return start(ctx, m, c) },
		sem:      make(chan struct{}, 1),
	}, nil
}

// add registers c; it fails once the manager is closed.
func (m *Manager) add(c *codeContext, asDefault bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return apierror.New(http.StatusServiceUnavailable, apierror.CodeServiceDraining, "execd is shutting down")
	}
	m.contexts[c.id] = c
	m.order = append(m.order, c.id)
	if asDefault {
		m.defaults[c.language] = c.id
	}
	return nil
}

// CreateContext handles POST /code/context. The interpreter is started
// before the reply, so a context that is returned is ready to run.
func (m *Manager) CreateContext(w http.ResponseWriter, r *http.Request) {
	var req sandbox.CreateCodeContextRequest
	if err := apierror.DecodeJSON(w, r, m.opts.MaxJSONBody, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Language == "" {
		req.Language = sandbox.LanguagePython
	}
	c, err := m.newContext(req.Language, req.Cwd)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	c.sem <- struct{}{}
	_, err = c.ensure(r.Context())
	<-c.sem
	if err != nil {
		apierror.Write(w, r, apierror.Wrap(err, http.StatusInternalServerError, apierror.CodeRuntimeError, "start %s interpreter: %v", c.language, err))
		return
	}
	if err := m.add(c, false); err != nil {
		c.close()
		apierror.Write(w, r, err)
		return
	}
	apierror.WriteJSON(w, http.StatusOK, c.info())
}

// ListContexts handles GET /code/contexts?language= (empty: all).
func (m *Manager) ListContexts(w http.ResponseWriter, r *http.Request) {
	lang := r.URL.Query().Get("language")
	m.mu.Lock()
	out := []sandbox.CodeContext{}
	for _, id := range m.order {
		if c := m.contexts[id]; lang == "" || c.language == lang {
			out = append(out, c.info())
		}
	}
	m.mu.Unlock()
	apierror.WriteJSON(w, http.StatusOK, out)
}

// GetContext handles GET /code/contexts/{context_id}.
func (m *Manager) GetContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("context_id")
	c, ok := m.get(id)
	if !ok {
		apierror.Write(w, r, notFound(id))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, c.info())
}

// DeleteContext handles DELETE /code/contexts/{context_id}.
func (m *Manager) DeleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("context_id")
	m.mu.Lock()
	c, ok := m.removeLocked(id)
	m.mu.Unlock()
	if !ok {
		apierror.Write(w, r, notFound(id))
		return
	}
	c.close()
	w.WriteHeader(http.StatusOK)
}

// DeleteContexts handles DELETE /code/contexts?language=.
func (m *Manager) DeleteContexts(w http.ResponseWriter, r *http.Request) {
	lang := r.URL.Query().Get("language")
	if lang == "" {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeMissingQuery, "query parameter language is required"))
		return
	}
	m.mu.Lock()
	var gone []*codeContext
	for _, id := range slices.Clone(m.order) {
		if m.contexts[id].language == lang {
			c, _ := m.removeLocked(id)
			gone = append(gone, c)
		}
	}
	m.mu.Unlock()
	for _, c := range gone {
		c.close()
	}
	w.WriteHeader(http.StatusOK)
}

func (m *Manager) removeLocked(id string) (*codeContext, bool) {
	c, ok := m.contexts[id]
	if !ok {
		return nil, false
	}
	delete(m.contexts, id)
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
	if m.defaults[c.language] == id {
		delete(m.defaults, c.language)
	}
	return c, true
}

// Run handles POST /code. Without a context id the run goes to the
// language's default context (python when no language is given), which is
// created on first use.
func (m *Manager) Run(w http.ResponseWriter, r *http.Request) {
	var req sandbox.RunCodeRequest
	if err := apierror.DecodeJSON(w, r, m.opts.MaxJSONBody, &req); err != nil {
		apierror.Write(w, r, err)
		return
	}
	if req.Code == "" {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeInvalidRequestBody, "code is required"))
		return
	}
	var want sandbox.CodeContext
	if req.Context != nil {
		want = *req.Context
	}
	c, err := m.resolve(want)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	c.run(r.Context(), eventstream.New(w), req.Code)
}

// resolve finds the context a run goes to, creating a default context when
// needed.
func (m *Manager) resolve(want sandbox.CodeContext) (*codeContext, error) {
	if want.ID != "" {
		c, ok := m.get(want.ID)
		if !ok {
			return nil, notFound(want.ID)
		}
		if want.Language != "" && want.Language != c.language {
			return nil, apierror.BadRequest(apierror.CodeInvalidRequestBody, "context %s is a %s context, not %s", c.id, c.language, want.Language)
		}
		return c, nil
	}
	lang := want.Language
	if lang == "" {
		lang = sandbox.LanguagePython
	}
	m.mu.Lock()
	if c, ok := m.contexts[m.defaults[lang]]; ok {
		m.mu.Unlock()
		return c, nil
	}
	m.mu.Unlock()
	c, err := m.newContext(lang, want.Cwd)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	// Another request may have created it meanwhile.
	if d, ok := m.contexts[m.defaults[lang]]; ok {
		m.mu.Unlock()
		return d, nil
	}
	m.mu.Unlock()
	// The interpreter starts with the first run, which holds the queue.
	if err := m.add(c, true); err != nil {
		return nil, err
	}
	return c, nil
}

// InterruptHTTP handles DELETE /code?id=.
func (m *Manager) InterruptHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		apierror.Write(w, r, apierror.BadRequest(apierror.CodeMissingQuery, "query parameter id is required"))
		return
	}
	if err := m.Interrupt(id); err != nil {
		apierror.Write(w, r, notFound(id))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// Interrupt stops the run in progress in context id; it succeeds when
// nothing runs.
func (m *Manager) Interrupt(id string) error {
	c, ok := m.get(id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	c.interrupt()
	return nil
}

// Close kills every interpreter; later requests are refused.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	all := make([]*codeContext, 0, len(m.contexts))
	for _, c := range m.contexts {
		all = append(all, c)
	}
	m.contexts, m.order, m.defaults = map[string]*codeContext{}, nil, map[string]string{}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func() { defer wg.Done(); c.close() }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) get(id string) (*codeContext, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.contexts[id]
	return c, ok
}

func notFound(id string) error {
	return apierror.NotFound(apierror.CodeContextNotFound, "code context %q not found", id)
}

// newID returns a context id in UUID form, as upstream's Jupyter session
// ids are.
func newID() string {
	h := randomHex(16)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// starters maps each language to the function starting its interpreter.
var starters = map[string]func(ctx context.Context, m *Manager, c *codeContext) (runner, error){
	sandbox.LanguagePython:     startPython,
	sandbox.LanguageJavaScript: startNode,
	sandbox.LanguageBash:       startBash,
	langJava:                   startJava,
	langGo:                     startGo,
	langTypeScript:             startTypeScript,
}

// Count returns how many code contexts exist.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.contexts)
}
