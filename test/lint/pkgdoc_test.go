package lint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// TestPackageDocs fails when a package has no doc comment or more than one,
// so that every package says what it owns in exactly one place.
func TestPackageDocs(t *testing.T) {
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "node_modules") {
			return filepath.SkipDir
		}
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, path, func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for pkgName, pkg := range pkgs {
			var docs []string
			for fname, f := range pkg.Files {
				if f.Doc != nil {
					docs = append(docs, filepath.Base(fname))
				}
			}
			rel, _ := filepath.Rel(root, path)
			switch {
			case len(docs) == 0:
				t.Errorf("package %s (%s) has no doc comment", pkgName, rel)
			case len(docs) > 1:
				t.Errorf("package %s (%s) has doc comments in %d files %v, want one", pkgName, rel, len(docs), docs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
