package docker

import (
	"errors"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestVersionMatch(t *testing.T) {
	have := []string{"3.10.14", "3.11.2"}
	for _, c := range []struct{ want, got string }{
		{"3.11", "3.11.2"},
		{"3", "3.10.14"}, // the first one it selects
		{"3.11.2", "3.11.2"},
		{" 3.11 ", "3.11.2"},
		{"v3.11", "3.11.2"},
		{"3.1", ""}, // not a dotted prefix of 3.10.14 nor of 3.11.2
		{"3.11.20", ""},
		{"2.7", ""},
		{"", ""},
		{"v", ""},
	} {
		if got := versionMatch(c.want, have); got != c.got {
			t.Errorf("versionMatch(%q, %q) = %q, want %q", c.want, have, got, c.got)
		}
	}
}

func TestCheckVersions(t *testing.T) {
	labels := map[string]string{
		labelVersionsPrefix + "python": "3.11.2",
		labelVersionsPrefix + "java":   "17.0.13",
		labelVersionsPrefix + "node":   "18.19.0",
		labelVersionsPrefix + "go":     "1.19.8",
		"io.opensandbox.image":         "code-interpreter",
	}
	spec := func(env map[string]string) runtime.Spec {
		return runtime.Spec{ID: "sb1", Image: "opensandbox/code-interpreter:v1.0.2", Env: env}
	}
	for _, env := range []map[string]string{
		nil,
		{"PYTHON_VERSION": "3.11", "JAVA_VERSION": "17", "NODE_VERSION": "v18", "GO_VERSION": "1.19"},
		{"PYTHON_VERSION": "3"},
		{"PYTHON_VERSION": ""},       // unset in effect
		{"RUBY_VERSION": "3.2"},      // a runtime the image says nothing about
		{"python_version": "2.7"},    // variables are case-sensitive
		{"PYTHON_VERSION": "3.11.2"}, // exact
		{"JAVA_VERSION": "17.0.13"},  // exact
		{"GO_VERSION": "1.19.8", "X": "y"},
	} {
		if err := checkVersions(spec(env), "ref", labels); err != nil {
			t.Errorf("checkVersions(%v) = %v, want nil", env, err)
		}
	}

	err := checkVersions(spec(map[string]string{"PYTHON_VERSION": "2.7", "NODE_VERSION": "20", "GO_VERSION": "1.19"}), "opensandbox/code-interpreter:v1.0.2", labels)
	if !errors.Is(err, runtime.ErrInvalid) {
		t.Fatalf("checkVersions with PYTHON_VERSION=2.7 = %v, want ErrInvalid", err)
	}
	for _, s := range []string{"opensandbox/code-interpreter:v1.0.2", "PYTHON_VERSION=2.7, but the image has python 3.11.2", "NODE_VERSION=20, but the image has node 18.19.0"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "GO_VERSION") {
		t.Errorf("error %q names GO_VERSION, which matched", err)
	}

	// An image without the labels (any image not built by images/build.sh)
	// takes the variables as plain environment.
	if err := checkVersions(spec(map[string]string{"PYTHON_VERSION": "2.7"}), "debian:12", map[string]string{"a": "b"}); err != nil {
		t.Errorf("checkVersions on an image without version labels = %v, want nil", err)
	}
	// Several versions of one runtime.
	multi := map[string]string{labelVersionsPrefix + "python": "3.10.14 3.11.2"}
	if err := checkVersions(spec(map[string]string{"PYTHON_VERSION": "3.10"}), "ref", multi); err != nil {
		t.Errorf("checkVersions(3.10 of 3.10.14 3.11.2) = %v", err)
	}
	if err := checkVersions(spec(map[string]string{"PYTHON_VERSION": "3.12"}), "ref", multi); err == nil || !strings.Contains(err.Error(), "python 3.10.14, 3.11.2") {
		t.Errorf("checkVersions(3.12 of 3.10.14 3.11.2) = %v, want the two listed", err)
	}
}
