package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissing runs a child test with and without CI=true and checks that
// the same missing prerequisite skips outside CI and fails in it.
func TestMissing(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Missing(t, "the child lacks %s", "a widget")
		return
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "SKIP: TestMissing"},
		{"false", false, "SKIP: TestMissing"},
		{"true", true, "prerequisite missing in CI"},
		{"1", true, "prerequisite missing in CI"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", EnvCI+"="+tc.ci)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail {
			t.Errorf("CI=%q: failed = %v, want %v\n%s", tc.ci, failed, tc.wantFail, out)
		}
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "the child lacks a widget") {
			t.Errorf("CI=%q: output lacks %q and the reason:\n%s", tc.ci, tc.want, out)
		}
	}
}
