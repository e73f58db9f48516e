package code

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Languages served here that pkg/sandbox has no constant for.
const (
	langJava       = "java"
	langGo         = "go"
	langTypeScript = "typescript"
)

// knownLanguages lists every language name the API knows, served or not, in
// the order error messages name them.
var knownLanguages = []string{
	sandbox.LanguagePython, sandbox.LanguageJavaScript, sandbox.LanguageBash,
	langTypeScript, langJava, langGo,
}

// detector finds the interpreters each language needs. A found Python (or
// TypeScript module) is remembered; a missing one is looked for again next
// time, so that an image that installs ipykernel later gets Python without
// an execd restart.
type detector struct {
	mu         sync.Mutex
	python     string
	typescript string // the resolved typescript module
}

// available reports the languages this execd can run with env.
func (d *detector) available(env []string) []string {
	var out []string
	for _, l := range knownLanguages {
		if _, err := d.interpreter(l, env); err == nil {
			out = append(out, l)
		}
	}
	return out
}

var errUnsupported = errors.New("language not supported")

// interpreter returns the program a language's contexts run.
func (d *detector) interpreter(lang string, env []string) (string, error) {
	switch lang {
	case sandbox.LanguagePython:
		return d.findPython(env)
	case sandbox.LanguageJavaScript:
		return lookPathIn("node", procenv.Lookup(env, "PATH"))
	case sandbox.LanguageBash:
		return procenv.Shell(), nil
	case langJava:
		// The driver needs a JDK (jdk.jshell, jdk.compiler), not a JRE:
		// jshell next to java tells them apart.
		path := procenv.Lookup(env, "PATH")
		java, err := lookPathIn("java", path)
		if err != nil {
			return "", errUnsupported
		}
		if _, err := lookPathIn("jshell", path); err != nil {
			if real, _ := filepath.EvalSymlinks(java); real == "" || !isFile(filepath.Join(filepath.Dir(real), "jshell")) {
				return "", errUnsupported
			}
		}
		return java, nil
	case langGo:
		return lookPathIn("go", procenv.Lookup(env, "PATH"))
	case langTypeScript:
		node, err := lookPathIn("node", procenv.Lookup(env, "PATH"))
		if err != nil {
			return "", err
		}
		if _, err := d.findTypeScript(node, env); err != nil {
			return "", err
		}
		return node, nil
	}
	return "", errUnsupported
}

// tsResolver prints where node finds the typescript module: EXECD_TYPESCRIPT
// if set; else node's own resolution (node_modules up from the working
// directory, NODE_PATH, ~/.node_modules); else the directories that hold
// packages directly: NODE_PATH's, Debian's /usr/share/nodejs and
// /usr/lib/nodejs (node-typescript), and the global npm prefixes.
const tsResolver = `
const path = require('path');
const env = process.env;
const tries = [];
if (env.EXECD_TYPESCRIPT) {
  tries.push(path.resolve(env.EXECD_TYPESCRIPT));
} else {
  tries.push('typescript');
  const dirs = (env.NODE_PATH || '').split(path.delimiter).filter(Boolean);
  dirs.push('/usr/share/nodejs', '/usr/lib/nodejs', '/usr/local/lib/node_modules', '/usr/lib/node_modules',
    path.join(path.dirname(process.execPath), '..', 'lib', 'node_modules'));
  for (const d of dirs) tries.push(path.join(d, 'typescript'));
}
for (const t of tries) {
  try {
    process.stdout.write(require.resolve(t));
    process.exit(0);
  } catch (e) {}
}
process.stderr.write('typescript module not found in ' + tries.join(', '));
process.exit(1);
`

// errNoTypeScript says why TypeScript is not served.
var errNoTypeScript = fmt.Errorf("%w: TypeScript needs node and its typescript module: Debian's node-typescript, or EXECD_TYPESCRIPT set to the module", errUnsupported)

// findTypeScript returns the typescript module that node (at node, with
// env) resolves, as the TypeScript driver loads it.
func (d *detector) findTypeScript(node string, env []string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.typescript != "" {
		return d.typescript, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", tsResolver)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil || len(out) == 0 {
		return "", errNoTypeScript
	}
	d.typescript = string(out)
	return d.typescript, nil
}

// findPython returns EXECD_PYTHON, else the first of python3 in PATH and
// /usr/bin/python3 that can import ipykernel.
func (d *detector) findPython(env []string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.python != "" {
		return d.python, nil
	}
	var candidates []string
	if p := procenv.Lookup(env, "EXECD_PYTHON"); p != "" {
		candidates = []string{p}
	} else {
		if p, err := lookPathIn("python3", procenv.Lookup(env, "PATH")); err == nil {
			candidates = append(candidates, p)
		}
		if p := "/usr/bin/python3"; len(candidates) == 0 || candidates[0] != p {
			candidates = append(candidates, p)
		}
	}
	for _, py := range candidates {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, py, "-c", "import ipykernel")
		cmd.Env = env
		err := cmd.Run()
		cancel()
		if err == nil {
			d.python = py
			return py, nil
		}
	}
	return "", errUnsupported
}

// lookPathIn is exec.LookPath over the given PATH value instead of execd's
// own, since the EXECD_ENVS file may extend it.
func lookPathIn(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
