package lint

import (
	"os/exec"
	"strings"
	"testing"
)

// sandboxBinaries run inside arbitrary sandbox images (execd) or as the
// only file of the sidecar image (egress): they must build without cgo and
// must not pull in orchestration clients or test code.
var sandboxBinaries = []string{"./cmd/execd", "./cmd/egress"}

var forbidden = map[string]string{
	"testing":                        "test code in a production binary",
	"github.com/docker/docker":       "sandbox binaries never talk to the container engine",
	"github.com/moby/moby":           "sandbox binaries never talk to the container engine",
	"k8s.io/client-go":               "sandbox binaries never talk to Kubernetes",
	"sigs.k8s.io/controller-runtime": "sandbox binaries never talk to Kubernetes",
	"github.com/getkin/kin-openapi":  "the OpenAPI validator is for tests only",
}

func TestSandboxBinaryDeps(t *testing.T) {
	root := repoRoot(t)
	for _, bin := range sandboxBinaries {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}", bin)
		cmd.Dir = root
		cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", bin, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, cgo, _ := strings.Cut(line, " ")
			if cgo != "0" {
				t.Errorf("%s depends on %s, which has cgo files", bin, pkg)
			}
			for prefix, why := range forbidden {
				if pkg == prefix || strings.HasPrefix(pkg, prefix+"/") {
					t.Errorf("%s imports %s: %s", bin, pkg, why)
				}
			}
		}
	}
}

// coreServices are the transport- and engine-neutral core and the HTTP
// front end over it: they drive any runtime through internal/runtime and
// must not depend on one driver (a second runtime sits beside Docker).
// Their tests may: the server's engine tests run against the real driver.
var coreServices = []string{"./internal/lifecycle", "./internal/server"}

// driverPrefixes are the packages of runtime drivers and engine clients.
var driverPrefixes = map[string]string{
	"github.com/opensandbox-go/opensandbox/internal/runtime/": "a runtime driver",
	"github.com/docker/docker":                                "the Docker engine client",
	"k8s.io/client-go":                                        "the Kubernetes client",
}

func TestCoreImportsNoDriver(t *testing.T) {
	root := repoRoot(t)
	for _, pkg := range coreServices {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for prefix, what := range driverPrefixes {
				if strings.HasPrefix(dep, prefix) {
					t.Errorf("%s depends on %s (%s): the core reaches engines only through internal/runtime", pkg, dep, what)
				}
			}
		}
	}
}

// TestLifecycleKnowsNoTransport keeps the lifecycle core free of HTTP: a
// front end speaks its protocol, the core only error classes. (It shares
// pkg/sandbox's data types, whose SDK half uses net/http; the core itself
// imports no transport package.)
func TestLifecycleKnowsNoTransport(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./internal/lifecycle")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.HasPrefix(imp, "net/http") || imp == "github.com/opensandbox-go/opensandbox/internal/apierror" || imp == "github.com/opensandbox-go/opensandbox/internal/httpmw" {
			t.Errorf("internal/lifecycle imports %s: the core must not know the transport", imp)
		}
	}
}
