package serverconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsExample loads the example of docs/configuration.md and checks
// that the page documents every key of Example("docker").
func TestDocsExample(t *testing.T) {
	page, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "```toml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/configuration.md has no ```toml example")
	}
	env, home := testEnv(t, nil)
	if _, _, err := Load(writeConfig(t, home, example), env); err != nil {
		t.Errorf("Load(docs example): %v", err)
	}

	full, _ := Example(ExampleDocker)
	keyRE := regexp.MustCompile(`(?m)^([a-z0-9_]+) = `)
	for _, m := range keyRE.FindAllStringSubmatch(full, -1) {
		if !strings.Contains(string(page), "| `"+m[1]+"` |") {
			t.Errorf("docs/configuration.md has no table row for key %q", m[1])
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
