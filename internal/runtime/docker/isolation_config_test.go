package docker

import (
	"reflect"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// configFor builds the container configuration of spec as Create would,
// without an engine.
func configFor(t *testing.T, mode string, spec runtime.Spec) (*container.Config, *container.HostConfig) {
	t.Helper()
	o := Options{ExecdPath: "/opt/execd", IsolatedExecution: mode}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	so, err := securityOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &Runtime{opts: o, securityOpt: so, network: networkBridge}
	cfg, hc, err := r.containerConfig(spec, "img", nil, volumePlan{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Labels = nil // they carry the creation time
	return cfg, hc
}

// TestIsolationOffIsUnchanged pins the hardening of sandboxes without
// isolated execution to what it was before the option existed: the
// default capability drop (SYS_ADMIN in it), nothing added,
// no-new-privileges and the engine's seccomp profile, and no bootstrap
// variable even when the caller's environment names it. A sandbox with
// isolated execution differs in exactly three things: SYS_ADMIN added,
// not dropped, and the bootstrap variable.
func TestIsolationOffIsUnchanged(t *testing.T) {
	spec := runtime.Spec{ID: "sb1", Image: "img", Entrypoint: []string{"sleep", "1"}, ExecdToken: "tok",
		Env: map[string]string{"A": "1", sandbox.IsolationBootstrapEnv: "1"}}
	wantEnv := []string{"A=1", "EXECD_ACCESS_TOKEN=tok"}
	for _, mode := range []string{IsolationOff, IsolationOnRequest} {
		cfg, hc := configFor(t, mode, spec)
		if hc.CapAdd != nil || !slices.Equal(hc.CapDrop, DefaultDropCapabilities) || !slices.Contains(hc.CapDrop, "SYS_ADMIN") {
			t.Errorf("%q: CapAdd %v CapDrop %v; want nothing added and the default drop", mode, hc.CapAdd, hc.CapDrop)
		}
		if !slices.Equal(hc.SecurityOpt, []string{"no-new-privileges:true"}) || hc.Privileged {
			t.Errorf("%q: SecurityOpt %v privileged %v", mode, hc.SecurityOpt, hc.Privileged)
		}
		if !slices.Equal(cfg.Env, wantEnv) {
			t.Errorf("%q: Env %q, want %q", mode, cfg.Env, wantEnv)
		}
	}
	offCfg, offHC := configFor(t, IsolationOnRequest, spec)
	on := spec
	on.IsolatedExecution = true
	onCfg, onHC := configFor(t, IsolationOnRequest, on)
	if !slices.Equal(onHC.CapAdd, []string{"SYS_ADMIN"}) || slices.Contains(onHC.CapDrop, "SYS_ADMIN") {
		t.Errorf("isolated: CapAdd %v CapDrop %v", onHC.CapAdd, onHC.CapDrop)
	}
	if !slices.Contains(onCfg.Env, sandbox.IsolationBootstrapEnv+"=1") {
		t.Errorf("isolated: Env %q lacks the bootstrap variable", onCfg.Env)
	}
	onHC.CapAdd = offHC.CapAdd
	onHC.CapDrop = slices.DeleteFunc(slices.Clone(offHC.CapDrop), func(c string) bool { return c == "SYS_ADMIN" })
	offHC.CapDrop = slices.DeleteFunc(offHC.CapDrop, func(c string) bool { return c == "SYS_ADMIN" })
	onCfg.Env = slices.DeleteFunc(onCfg.Env, func(e string) bool { return e == sandbox.IsolationBootstrapEnv+"=1" })
	if !reflect.DeepEqual(onCfg, offCfg) || !reflect.DeepEqual(onHC, offHC) {
		t.Errorf("isolated and plain sandboxes differ beyond SYS_ADMIN and the bootstrap variable:\n%+v\n%+v\n%+v\n%+v", onCfg, offCfg, onHC, offHC)
	}
}
