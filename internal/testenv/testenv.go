// Package testenv decides what a test does when this machine lacks
// something it needs (a Docker engine, root, a kernel feature, a tool).
//
// On a developer's machine such a test skips, saying what is missing. In
// CI (the environment variable CI=true, set by .ci/run) it fails instead:
// CI must never pass because half of the suite quietly did not run.
package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvCI is the variable that marks a CI run; "true" or "1" turns missing
// prerequisites into failures.
const EnvCI = "CI"

// InCI reports whether this is a CI run.
func InCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(EnvCI)))
	return v == "true" || v == "1"
}

// Missing stops t because a prerequisite is missing: a skip outside CI,
// a failure in CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("prerequisite missing in CI (CI=true turns this skip into a failure): %s", msg)
	}
	t.Skip(msg)
}

// NeedRoot stops t (see Missing) unless the test runs as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}
