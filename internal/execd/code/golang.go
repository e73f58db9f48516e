package code

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/eventstream"
	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// goRunner is a Go context. Go has no REPL, so a context is a workspace
// (a module in a scratch directory) and a list of the declarations of its
// successful cells. A cell is either
//
//   - declarations (imports, funcs, methods, types, package-level vars and
//     consts): compiled with the earlier ones and, when that succeeds,
//     kept; a later declaration of the same name replaces the earlier one;
//     nothing runs;
//   - statements, optionally preceded by imports: compiled as the body of
//     main() of a program holding every kept declaration, and run. The
//     statements are not kept: local variables do not outlive their cell,
//     and package-level variables start from their initial values in every
//     run (each run is a new process);
//   - a whole program, as Go is usually written and as upstream's examples
//     are: an optional `package main`, imports, declarations and a func
//     main(). Its declarations are kept as for a declarations cell, and
//     its main runs (as a statements cell would) but is not kept.
//
// Imports a program does not use are left out of it, so that importing in
// one cell and using the package in a later one works.
type goRunner struct {
	id     string
	bin    string   // go
	env    []string // for go build
	runEnv []string // for the program: the context's environment
	cwd    string   // the context's working directory, where programs run
	dir    string   // scratch: the module, GOCACHE, GOPATH

	decls   []goDecl
	imports map[string]string // import path -> name ("" = default)

	mu     sync.Mutex
	pgid   int // process group of the build or program running, 0 if none
	closed bool
}

type goDecl struct {
	names []string // what it declares, for replacement
	src   string
}

func startGo(_ context.Context, m *Manager, c *codeContext) (runner, error) {
	env, err := m.opts.Env.Environ(nil)
	if err != nil {
		return nil, err
	}
	bin, err := m.det.interpreter(langGo, env)
	if err != nil {
		return nil, errors.New("go not found in PATH")
	}
	dir, err := procenv.MkdirScratch("execd-go-")
	if err != nil {
		return nil, err
	}
	mod := filepath.Join(dir, "cell")
	if err := os.MkdirAll(mod, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module cell\n\ngo 1.19\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	runEnv := env
	env = append(env[:len(env):len(env)],
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GO111MODULE=on", "GOWORK=off",
		"GOPATH="+filepath.Join(dir, "gopath"),
	)
	if !hasGoCache(env) {
		// The go command's own cache (GOCACHE, else under $XDG_CACHE_HOME
		// or $HOME) is shared by every context and the user's builds, so
		// the standard library is compiled once per sandbox, not once per
		// context (a minute on a loaded two-core host); only without any
		// of them does a context get a cache of its own.
		env = append(env, "GOCACHE="+filepath.Join(dir, "cache"))
	}
	return &goRunner{id: c.id, bin: bin, env: env, runEnv: runEnv, cwd: c.dir, dir: dir, imports: map[string]string{}}, nil
}

// goCell is a parsed cell.
type goCell struct {
	imports map[string]string
	decls   []goDecl // declarations to keep (once the program builds)
	body    string   // the body of main() to run, when run is set
	run     bool
}

// parseGoCell classifies a cell; the error is a syntax error, reported as
// for a compile error. A cell is a whole program when it has a package
// clause or a func main: its declarations are kept like those of a
// declarations cell, and its main (not kept) is what runs.
func parseGoCell(code string) (*goCell, error) {
	if _, err := parser.ParseFile(token.NewFileSet(), "cell.go", code, parser.PackageClauseOnly); err == nil {
		return parseGoFile(code)
	}
	fset := token.NewFileSet()
	const head = "package main\n"
	src := head + code
	f, err := parser.ParseFile(fset, "cell.go", src, parser.ImportsOnly)
	if err != nil {
		return nil, cellError(err, 1)
	}
	cell := &goCell{imports: map[string]string{}}
	rest := code
	if len(f.Decls) > 0 {
		end := fset.Position(f.Decls[len(f.Decls)-1].End()).Offset - len(head)
		rest = code[end:]
		addImports(cell, f)
	}
	if strings.TrimSpace(rest) == "" {
		return cell, nil
	}
	// Declarations?
	fset = token.NewFileSet()
	df, derr := parser.ParseFile(fset, "cell.go", head+rest, parser.ParseComments)
	if derr == nil {
		addDecls(cell, fset, df, head+rest)
		return cell, nil
	}
	// Statements?
	const mainHead = "package main\nfunc main() {\n"
	if _, serr := parser.ParseFile(token.NewFileSet(), "cell.go", mainHead+rest+"\n}\n", 0); serr == nil {
		cell.body, cell.run = rest, true
		return cell, nil
	}
	// Neither: report the error of the likelier reading.
	trim := strings.TrimSpace(rest)
	for _, kw := range []string{"func ", "type ", "var ", "const ", "import "} {
		if strings.HasPrefix(trim, kw) {
			return nil, cellError(derr, 1)
		}
	}
	_, serr := parser.ParseFile(token.NewFileSet(), "cell.go", mainHead+rest+"\n}\n", 0)
	return nil, cellError(serr, 2)
}

// parseGoFile parses a cell that is a Go source file: package main,
// imports, declarations.
func parseGoFile(code string) (*goCell, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "cell.go", code, parser.ParseComments)
	if err != nil {
		return nil, cellError(err, 0)
	}
	if f.Name.Name != "main" {
		return nil, fmt.Errorf("cell:%d:%d: a cell is part of package main, not package %s", fset.Position(f.Name.Pos()).Line, fset.Position(f.Name.Pos()).Column, f.Name.Name)
	}
	cell := &goCell{imports: map[string]string{}}
	addImports(cell, f)
	addDecls(cell, fset, f, code)
	return cell, nil
}

func addImports(cell *goCell, f *ast.File) {
	for _, is := range f.Imports {
		p, _ := strconv.Unquote(is.Path.Value)
		name := ""
		if is.Name != nil {
			name = is.Name.Name
		}
		cell.imports[p] = name
	}
}

// addDecls adds the declarations of f (parsed from src), but its imports,
// to cell; a func main() becomes the body to run.
func addDecls(cell *goCell, fset *token.FileSet, f *ast.File, src string) {
	for _, d := range f.Decls {
		if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.IMPORT {
			continue
		}
		if fd, ok := d.(*ast.FuncDecl); ok && isMain(fd) {
			lb, rb := fset.Position(fd.Body.Lbrace).Offset, fset.Position(fd.Body.Rbrace).Offset
			cell.body, cell.run = src[lb+1:rb], true
			continue
		}
		start, end := fset.Position(d.Pos()).Offset, fset.Position(d.End()).Offset
		if gd, ok := d.(*ast.GenDecl); ok && gd.Doc != nil {
			start = fset.Position(gd.Doc.Pos()).Offset
		} else if fd, ok := d.(*ast.FuncDecl); ok && fd.Doc != nil {
			start = fset.Position(fd.Doc.Pos()).Offset
		}
		cell.decls = append(cell.decls, goDecl{names: declNames(d), src: src[start:end]})
	}
}

// isMain reports whether fd is the program's func main(): the one a whole
// program cell runs. A main with a receiver, parameters or results is left
// to the compiler to reject.
func isMain(fd *ast.FuncDecl) bool {
	return fd.Recv == nil && fd.Name.Name == "main" && fd.Body != nil && fd.Type.TypeParams == nil &&
		fd.Type.Params.NumFields() == 0 && fd.Type.Results.NumFields() == 0
}

// cellError turns a parse error on the wrapped source into lines of the
// cell (skip: the lines added before it).
func cellError(err error, skip int) error {
	var list []string
	re := regexp.MustCompile(`^cell\.go:(\d+):(\d+): `)
	for _, l := range strings.Split(err.Error(), "\n") {
		if m := re.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			l = fmt.Sprintf("cell:%d:%s: %s", n-skip, m[2], l[len(m[0]):])
		}
		list = append(list, l)
	}
	return errors.New(strings.Join(list, "\n"))
}

func declNames(d ast.Decl) []string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil && len(d.Recv.List) > 0 {
			t := d.Recv.List[0].Type
			for {
				switch x := t.(type) {
				case *ast.StarExpr:
					t = x.X
					continue
				case *ast.IndexExpr:
					t = x.X
					continue
				case *ast.IndexListExpr:
					t = x.X
					continue
				}
				break
			}
			if id, ok := t.(*ast.Ident); ok {
				return []string{id.Name + "." + d.Name.Name}
			}
			return nil
		}
		if d.Name.Name == "init" || d.Name.Name == "_" {
			return nil
		}
		return []string{d.Name.Name}
	case *ast.GenDecl:
		var out []string
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				out = append(out, s.Name.Name)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.Name != "_" {
						out = append(out, n.Name)
					}
				}
			}
		}
		return out
	}
	return nil
}

// program returns the source of main.go for the given declarations,
// imports and main body, leaving out the imports nothing refers to.
func program(decls []goDecl, imports map[string]string, body string) string {
	var code strings.Builder
	for _, d := range decls {
		code.WriteString(d.src)
		code.WriteString("\n\n")
	}
	code.WriteString("func main() {\n")
	code.WriteString(body)
	code.WriteString("\n}\n")
	used := map[string]bool{}
	if f, err := parser.ParseFile(token.NewFileSet(), "", "package main\n"+code.String(), 0); err == nil {
		ast.Inspect(f, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := s.X.(*ast.Ident); ok {
					used[id.Name] = true
				}
			}
			return true
		})
	}
	paths := make([]string, 0, len(imports))
	for p := range imports {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var out strings.Builder
	out.WriteString("package main\n\n")
	for _, p := range paths {
		name := imports[p]
		switch {
		case name == "_" || name == ".":
		case name != "" && !used[name]:
			continue
		case name == "" && !used[importName(p)]:
			continue
		}
		fmt.Fprintf(&out, "import %s %q\n", name, p)
	}
	// Keep line numbers of errors relatable: the cell's code follows.
	out.WriteString("\n")
	out.WriteString(code.String())
	return out.String()
}

// importName guesses the package name of an import path: its last
// element, without a /vN suffix (true of the standard library).
func importName(p string) string {
	b := path.Base(p)
	if len(b) > 1 && b[0] == 'v' && strings.Trim(b[1:], "0123456789") == "" {
		b = path.Base(path.Dir(p))
	}
	return strings.NewReplacer("-", "_", ".", "_").Replace(b)
}

func (g *goRunner) run(ctx context.Context, sw *eventstream.Writer, code string, stop <-chan struct{}) bool {
	started := time.Now()
	sw.SendFlush(sandbox.StreamEvent{Type: sandbox.EventInit, Text: g.id})
	pingCtx, stopPing := context.WithCancel(ctx)
	defer stopPing()
	go sw.Ping(pingCtx, eventstream.PingInterval)
	defer sw.Close()

	cell, err := parseGoCell(code)
	if err != nil {
		stopPing()
		msg := err.Error()
		sendError(sw, "CompilationError", strings.SplitN(msg, "\n", 2)[0], strings.Split(msg, "\n"))
		return true
	}
	imports := make(map[string]string, len(g.imports)+len(cell.imports))
	for p, n := range g.imports {
		imports[p] = n
	}
	for p, n := range cell.imports {
		imports[p] = n
	}
	decls := g.decls
	if len(cell.decls) > 0 {
		// New declarations replace earlier ones of the same names.
		replaced := map[string]bool{}
		for _, d := range cell.decls {
			for _, n := range d.names {
				replaced[n] = true
			}
		}
		decls = nil
		for _, d := range g.decls {
			keep := true
			for _, n := range d.names {
				if replaced[n] {
					keep = false
				}
			}
			if keep {
				decls = append(decls, d)
			}
		}
		decls = append(decls, cell.decls...)
	}
	src := program(decls, imports, cell.body)
	mod := filepath.Join(g.dir, "cell")
	if err := os.WriteFile(filepath.Join(mod, "main.go"), []byte(src), 0o600); err != nil {
		sendError(sw, "InternalError", err.Error(), nil)
		return true
	}
	exe := filepath.Join(g.dir, "prog")
	var buildOut bytes.Buffer
	build := exec.Command(g.bin, "build", "-o", exe, ".")
	build.Dir, build.Env = mod, g.env
	build.Stdout, build.Stderr = &buildOut, &buildOut
	status, err := g.exec(build, stop)
	if err != nil {
		sendError(sw, "InternalError", "go build: "+err.Error(), nil)
		return true
	}
	if stopped(stop) {
		stopPing()
		msg := "execution interrupted: the build was killed; the context keeps its declarations"
		sendError(sw, sandbox.ErrNameInterrupted, msg, []string{msg})
		return true
	}
	if status != 0 {
		stopPing()
		lines := compileErrors(buildOut.String())
		first := "build failed"
		if len(lines) > 0 {
			first = lines[0]
		}
		sendError(sw, "CompilationError", first, lines)
		return true
	}
	// It compiles: the declarations and imports are kept.
	g.decls, g.imports = decls, imports
	if !cell.run {
		stopPing()
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: time.Since(started).Milliseconds()})
		return true
	}
	prog := exec.Command(exe)
	prog.Dir, prog.Env = g.cwd, g.runEnv
	var stderr tailBuffer
	stderr.max = 8 << 10
	prog.Stdout = streamWriter{sw, sandbox.EventStdout, nil}
	prog.Stderr = streamWriter{sw, sandbox.EventStderr, &stderr}
	status, err = g.exec(prog, stop)
	stopPing()
	switch {
	case err != nil:
		sendError(sw, "InternalError", "run: "+err.Error(), nil)
	case stopped(stop):
		msg := "execution interrupted: the program was killed; the context keeps its declarations"
		sendError(sw, sandbox.ErrNameInterrupted, msg, []string{msg})
	case status != 0:
		ename, evalue := "ExitError", "exit status "+strconv.Itoa(status)
		if status > 128 {
			evalue = fmt.Sprintf("killed by signal %d", status-128)
		}
		tail := stderr.String()
		if i := strings.LastIndex(tail, "panic: "); i >= 0 {
			ename = "panic"
			evalue = strings.SplitN(tail[i+len("panic: "):], "\n", 2)[0]
		}
		tb := []string{evalue}
		if tail != "" {
			tb = strings.Split(strings.TrimRight(tail, "\n"), "\n")
		}
		sendError(sw, ename, evalue, tb)
	default:
		sw.Send(sandbox.StreamEvent{Type: sandbox.EventExecutionComplete, ExecutionTime: time.Since(started).Milliseconds()})
	}
	return true
}

// compileErrors keeps the compiler's messages, without the "# cell" header.
func compileErrors(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(l, "# ") || l == "" {
			continue
		}
		lines = append(lines, strings.TrimPrefix(l, "./"))
	}
	return lines
}

// exec runs cmd in its own process group, killed once stop closes, and
// returns its exit status; it does not start cmd when stop is closed
// already.
func (g *goRunner) exec(cmd *exec.Cmd, stop <-chan struct{}) (int, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g.mu.Lock()
	if g.closed || stopped(stop) {
		g.mu.Unlock()
		return -1, nil
	}
	if err := cmd.Start(); err != nil {
		g.mu.Unlock()
		return 0, err
	}
	g.pgid = cmd.Process.Pid
	g.mu.Unlock()
	proc.PreferAsOOMVictim(cmd.Process.Pid)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-stop:
			g.kill()
		case <-done:
		}
	}()
	werr := cmd.Wait()
	close(done)
	wg.Wait()
	g.mu.Lock()
	proc.SignalGroup(g.pgid, syscall.SIGKILL) // what the program left behind
	g.pgid = 0
	g.mu.Unlock()
	code, _ := proc.WaitExitCode(cmd, werr)
	return code, nil
}

// kill kills the build or program in progress.
func (g *goRunner) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pgid != 0 {
		proc.SignalGroup(g.pgid, syscall.SIGKILL)
	}
}

func (g *goRunner) alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.closed
}

func (g *goRunner) close() {
	g.mu.Lock()
	g.closed = true
	if g.pgid != 0 {
		proc.SignalGroup(g.pgid, syscall.SIGKILL)
	}
	g.mu.Unlock()
	// The build cache holds read-only files.
	filepath.Walk(g.dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(g.dir)
}

// streamWriter sends what a program writes as stdout or stderr events.
type streamWriter struct {
	sw   *eventstream.Writer
	typ  string
	tail *tailBuffer
}

func (w streamWriter) Write(p []byte) (int, error) {
	if w.tail != nil {
		w.tail.Write(p)
	}
	w.sw.SendFlush(sandbox.StreamEvent{Type: w.typ, Text: string(p)})
	return len(p), nil
}

// hasGoCache reports whether env gives the go command a build cache
// location (GOCACHE, XDG_CACHE_HOME or HOME, the last setting wins).
func hasGoCache(env []string) bool {
	set := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			set[k] = v
		}
	}
	return set["GOCACHE"] != "" && set["GOCACHE"] != "off" || set["XDG_CACHE_HOME"] != "" || set["HOME"] != ""
}
