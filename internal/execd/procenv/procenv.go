// Package procenv builds the environment, working directory and shell of the
// processes execd starts: execd's own environment, then the KEY=VALUE lines
// of the EXECD_ENVS file (re-read on every start, so a bootstrap script may
// add to it later), then the variables of the request.
package procenv

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
)

// DefaultEnvFile is where execd looks for extra variables when EXECD_ENVS is unset.
const DefaultEnvFile = "/opt/opensandbox/.env"

// Builder assembles process environments. The zero value uses no env file.
type Builder struct {
	// EnvFile is a file of KEY=VALUE lines; "" means none. A missing file is
	// not an error.
	EnvFile string
	// Base is the starting environment; nil means os.Environ().
	Base []string
}

// Environ returns the environment for a new process with extra applied last.
func (b Builder) Environ(extra map[string]string) ([]string, error) {
	base := b.Base
	if base == nil {
		base = os.Environ()
	}
	env := newEnv(base)
	if b.EnvFile != "" {
		if err := env.loadFile(b.EnvFile); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.ContainsRune(extra[k], 0) {
			return nil, fmt.Errorf("environment variable %s contains a NUL byte", k)
		}
		env.set(k, extra[k])
	}
	return env.list(), nil
}

type envMap struct {
	order []string
	vals  map[string]string
}

func newEnv(kvs []string) *envMap {
	e := &envMap{vals: make(map[string]string, len(kvs))}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" {
			e.set(k, v)
		}
	}
	return e
}

func (e *envMap) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.order = append(e.order, k)
	}
	e.vals[k] = v
}

func (e *envMap) get(k string) string { return e.vals[k] }

func (e *envMap) list() []string {
	out := make([]string, 0, len(e.order))
	for _, k := range e.order {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

// loadFile applies KEY=VALUE lines; blank lines and # comments are skipped,
// an "export " prefix and matching quotes are dropped, and $VAR / ${VAR}
// refer to variables defined so far.
func (e *envMap) loadFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open env file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			quote := v[0]
			v = v[1 : len(v)-1]
			if quote == '\'' {
				e.set(k, v)
				continue
			}
		}
		e.set(k, os.Expand(v, e.get))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read env file %s: %w", path, err)
	}
	return nil
}

// Lookup returns the value of key in env.
func Lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// ResolveDir expands a leading ~ and $VAR references in dir using env and
// checks that the result is a directory. "" means the current directory of
// execd, returned as "".
func ResolveDir(dir string, env []string) (string, error) {
	if dir == "" {
		return "", nil
	}
	get := func(k string) string { return Lookup(env, k) }
	if dir == "~" || strings.HasPrefix(dir, "~/") {
		home := get("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = home + dir[1:]
	}
	dir = filepath.Clean(os.Expand(dir, get))
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("working directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("working directory %s: not a directory", dir)
	}
	return dir, nil
}

var shellPath atomic.Pointer[string]

// Shell returns the shell used to run command strings: bash when the image
// has it, else sh. The answer is remembered while that file exists, since a
// PATH search on every command is measurable in the round trip.
func Shell() string {
	if p := shellPath.Load(); p != nil {
		if _, err := os.Stat(*p); err == nil {
			return *p
		}
	}
	p := "/bin/sh"
	for _, sh := range []string{"bash", "/bin/bash", "sh", "/bin/sh"} {
		if found, err := exec.LookPath(sh); err == nil {
			p = found
			break
		}
	}
	shellPath.Store(&p)
	return p
}

// scratchBases are tried in order for execd's private scratch directories.
// Sandbox images are arbitrary: some have no /tmp at all.
var scratchBases = []string{"", "/var/tmp", "/dev/shm", "/run"}

// MkdirScratch creates a private (0700) directory for execd's own files,
// like os.MkdirTemp, but falls back to other writable places when the
// image has no usable temporary directory, and finally creates /tmp.
func MkdirScratch(pattern string) (string, error) {
	var firstErr error
	for _, base := range scratchBases {
		dir, err := os.MkdirTemp(base, pattern)
		if err == nil {
			return dir, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if err := os.Mkdir("/tmp", 0o1777); err == nil || errors.Is(err, fs.ErrExist) {
		os.Chmod("/tmp", 0o1777)
		if dir, err := os.MkdirTemp("/tmp", pattern); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no writable scratch directory (tried $TMPDIR, /var/tmp, /dev/shm, /run, /tmp): %w", firstErr)
}
