package serverconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestDocsExample loads every example of docs/configuration.md and checks
// that the page documents every key of both init-config examples and
// every key of the [runtime] and [kubernetes] tables.
func TestDocsExample(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rest, n := string(page), 0
	for {
		_, after, ok := strings.Cut(rest, "```toml\n")
		if !ok {
			break
		}
		example, after, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatalf("docs/configuration.md: a ```toml block does not end")
		}
		rest, n = after, n+1
		env, home := testEnv(t, nil)
		if _, _, err := Load(writeConfig(t, home, example), env); err != nil {
			t.Errorf("Load(docs example %d): %v", n, err)
		}
	}
	if n < 2 {
		t.Errorf("docs/configuration.md has %d ```toml examples, want a Docker and a Kubernetes one", n)
	}

	documented := func(key string) bool { return strings.Contains(string(page), "| `"+key+"` |") }
	keyRE := regexp.MustCompile(`(?m)^([a-z0-9_]+) = `)
	for _, kind := range []string{ExampleDocker, ExampleKubernetes} {
		full, _ := Example(kind)
		for _, m := range keyRE.FindAllStringSubmatch(full, -1) {
			if !documented(m[1]) {
				t.Errorf("docs/configuration.md has no table row for key %q of Example(%q)", m[1], kind)
			}
		}
	}
	for _, v := range []any{Runtime{}, Kubernetes{}, ExecdInitResources{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if key := typ.Field(i).Tag.Get("toml"); key != "" && key != "-" && !documented(key) {
				t.Errorf("docs/configuration.md has no table row for %s key %q", typ.Name(), key)
			}
		}
	}
}

// TestDeployConfigs loads every config file shipped under deploy/.
func TestDeployConfigs(t *testing.T) {
	paths, err := filepath.Glob("../../deploy/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		env, _ := testEnv(t, nil)
		if _, warnings, err := Load(p, env); err != nil {
			t.Errorf("Load(%s): %v", p, err)
		} else if len(warnings) > 0 {
			t.Logf("Load(%s) warnings: %q", p, warnings)
		}
	}
}
