package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/versions"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestNetworkOptions(t *testing.T) {
	execd := filepath.Join(t.TempDir(), "execd")
	no := false
	tests := []struct {
		name        string
		mod         func(*Options)
		wantMode    string
		wantNet     string
		wantIsolate bool
		wantErr     bool
	}{
		{"defaults", func(*Options) {}, "bridge", "opensandbox", true, false},
		{"isolation off", func(o *Options) { o.IsolateSandboxes = &no }, "bridge", "opensandbox", false, false},
		{"own bridge network", func(o *Options) { o.BridgeNetwork = "osb.net_1" }, "bridge", "osb.net_1", true, false},
		{"host", func(o *Options) { o.NetworkMode = "host" }, "host", "opensandbox", true, false},
		{"custom network", func(o *Options) { o.NetworkMode = "sandboxes-1" }, "sandboxes-1", "opensandbox", true, false},
		{"mode none", func(o *Options) { o.NetworkMode = "none" }, "", "", false, true},
		{"mode default", func(o *Options) { o.NetworkMode = "default" }, "", "", false, true},
		{"mode container", func(o *Options) { o.NetworkMode = "container:abc" }, "", "", false, true},
		{"mode with space", func(o *Options) { o.NetworkMode = "my net" }, "", "", false, true},
		{"bridge network bridge", func(o *Options) { o.BridgeNetwork = "bridge" }, "", "", false, true},
		{"bridge network host", func(o *Options) { o.BridgeNetwork = "host" }, "", "", false, true},
		{"bridge network bad name", func(o *Options) { o.BridgeNetwork = "-x" }, "", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{ExecdPath: execd}
			tt.mod(&o)
			err := o.setDefaults()
			if tt.wantErr {
				wantClass(t, "setDefaults", err, runtime.ErrInvalid)
				return
			}
			if err != nil {
				t.Fatalf("setDefaults: %v", err)
			}
			if o.NetworkMode != tt.wantMode || o.BridgeNetwork != tt.wantNet || *o.IsolateSandboxes != tt.wantIsolate {
				t.Errorf("options = mode %q network %q isolate %v; want %q %q %v",
					o.NetworkMode, o.BridgeNetwork, *o.IsolateSandboxes, tt.wantMode, tt.wantNet, tt.wantIsolate)
			}
		})
	}
}

func TestNameservers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resolv.conf")
	conf := "# generated\nsearch example.org\nnameserver 127.0.0.53\nnameserver 10.0.0.2\nnameserver  2001:db8::1 \nnameserver ::1\nnameserver fe80::1%eth0\nnameserver bogus\noptions edns0\nnameserver 192.0.2.7"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.2", "2001:db8::1", "192.0.2.7"}
	if got := nameservers(path); !slices.Equal(got, want) {
		t.Errorf("nameservers = %q, want %q", got, want)
	}
	if got := nameservers(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("nameservers(missing file) = %q, want none", got)
	}
}

func TestICCOn(t *testing.T) {
	for opt, want := range map[string]bool{"": true, "true": true, "1": true, "false": false, "0": false, "junk": true} {
		nw := network.Inspect{Options: map[string]string{}}
		if opt != "" {
			nw.Options[iccOption] = opt
		}
		if got := iccOn(nw); got != want {
			t.Errorf("iccOn(%s=%q) = %v, want %v", iccOption, opt, got, want)
		}
	}
}

// testNetwork returns a fresh network name, removed (with whatever a
// failed test left on it) when the test ends.
func testNetwork(t *testing.T) string {
	t.Helper()
	name := "osb-test-" + env.run + "-" + randomHex(3)
	t.Cleanup(func() {
		// Every network of that name: a racing create may have made several.
		for _, id := range strings.Fields(dockerOut("network", "ls", "-q", "--filter", "name="+name)) {
			exec.Command("docker", "network", "rm", id).Run()
		}
	})
	return name
}

// networkOf inspects the network id or name with the engine.
func networkOf(t *testing.T, ref string) network.Inspect {
	t.Helper()
	nw, err := env.cli.NetworkInspect(testCtx(t), ref, network.InspectOptions{})
	if err != nil {
		t.Fatalf("inspect network %s: %v", ref, err)
	}
	return nw
}

// attachedTo returns the network mode and the names of the networks the
// container of sandbox id is on.
func attachedTo(t *testing.T, id string) (string, []string) {
	t.Helper()
	c, err := env.cli.ContainerInspect(testCtx(t), containerName(id))
	if err != nil {
		t.Fatalf("inspect %s: %v", containerName(id), err)
	}
	var names []string
	for n := range c.NetworkSettings.Networks {
		names = append(names, n)
	}
	return string(c.HostConfig.NetworkMode), names
}

// TestManagedNetwork: New creates the isolated network, concurrent
// starts all end up on an isolated network of that name, and a sandbox
// joins it with its ports published as on the default bridge.
func TestManagedNetwork(t *testing.T) {
	needEngine(t)
	name := testNetwork(t)

	// Servers starting together race to create it.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		rts  []*Runtime
		errs []error
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := New(ctx, Options{Client: env.cli, ExecdPath: env.execd, BridgeNetwork: name,
				Labels: map[string]string{testLabelKey: testLabelVal, runLabelKey: env.run}})
			mu.Lock()
			defer mu.Unlock()
			rts, errs = append(rts, r), append(errs, err)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("New #%d on a fresh network: %v", i, err)
		}
	}
	// Racing creates may have made several; one is left, the oldest.
	if ids := strings.Fields(dockerOut("network", "ls", "-q", "--filter", "name=^"+name+"$")); len(ids) != 1 {
		t.Fatalf("networks named %s after concurrent starts: %q; want exactly one", name, ids)
	}
	for _, r := range rts {
		if r.network != name {
			t.Errorf("runtime network = %q, want %q", r.network, name)
		}
		nw := networkOf(t, r.network)
		if nw.Name != name || nw.Driver != "bridge" || nw.Options[iccOption] != "false" || nw.Labels[labelManagedNetwork] != "true" {
			t.Errorf("runtime network = %s driver %q options %v labels %v; want %s, bridge, %s=false, %s=true",
				nw.Name, nw.Driver, nw.Options, nw.Labels, name, iccOption, labelManagedNetwork)
		}
	}

	// A later start finds the network and uses it as it is.
	r := newTestRuntime(t, func(o *Options) { o.BridgeNetwork = name })
	if r.network != name {
		t.Fatalf("second start uses network %s, want %s", r.network, name)
	}
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	// Joined by the id of the network that passed the checks.
	mode, nets := attachedTo(t, spec.ID)
	if id := networkOf(t, name).ID; mode != id || !slices.Equal(nets, []string{name}) {
		t.Errorf("sandbox network mode %q on %q; want %s on [%s]", mode, nets, id, name)
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo hi"); res.exit != "0" || strings.Join(res.stdout, "") != "hi" {
		t.Errorf("command through the published execd port = %+v", res)
	}
}

// TestManagedNetworkRefused: a network of the managed name whose
// containers may reach each other stops New with a message telling both
// ways out; isolation off then uses the engine's default bridge.
func TestManagedNetworkRefused(t *testing.T) {
	needEngine(t)
	name := testNetwork(t)
	if out, err := dockerRun("network", "create", "--driver", "bridge", name); err != nil {
		t.Fatalf("docker network create: %v\n%s", err, out)
	}
	_, err := New(testCtx(t), Options{Client: env.cli, ExecdPath: env.execd, BridgeNetwork: name})
	wantClass(t, "New with an existing network that has ICC on", err, runtime.ErrInvalid)
	for _, w := range []string{name, iccOption, "docker network rm " + name, "isolate_sandboxes = false"} {
		if err != nil && !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if nw := networkOf(t, name); nw.Options[iccOption] != "" {
		t.Errorf("the refused network was changed: options %v", nw.Options)
	}

	no := false
	r := newTestRuntime(t, func(o *Options) { o.BridgeNetwork = name; o.IsolateSandboxes = &no })
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	if mode, nets := attachedTo(t, spec.ID); mode != "bridge" || !slices.Equal(nets, []string{"bridge"}) {
		t.Errorf("sandbox without isolation: network mode %q on %q; want the default bridge", mode, nets)
	}
}

// TestCustomNetwork: a network mode naming a user-defined network attaches
// sandboxes to it (ICC on is the operator's choice); a missing one or one
// of another driver stops New.
func TestCustomNetwork(t *testing.T) {
	needEngine(t)
	name := testNetwork(t)
	_, err := New(testCtx(t), Options{Client: env.cli, ExecdPath: env.execd, NetworkMode: name})
	wantClass(t, "New with a missing custom network", err, runtime.ErrInvalid)
	if err != nil && (!strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "does not exist")) {
		t.Errorf("error %q does not say that network %s does not exist", err, name)
	}
	_, err = New(testCtx(t), Options{Client: env.cli, ExecdPath: env.execd, NetworkMode: "none-such-" + env.run, IsolateSandboxes: new(bool)})
	wantClass(t, "New with a missing custom network and isolation off", err, runtime.ErrInvalid)

	if out, err := dockerRun("network", "create", "--driver", "bridge", name); err != nil {
		t.Fatalf("docker network create: %v\n%s", err, out)
	}
	r := newTestRuntime(t, func(o *Options) { o.NetworkMode = name })
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	// Joined by the id of the network that passed the checks.
	mode, nets := attachedTo(t, spec.ID)
	if id := networkOf(t, name).ID; mode != id || !slices.Equal(nets, []string{name}) {
		t.Errorf("sandbox network mode %q on %q; want %s on [%s]", mode, nets, id, name)
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo hi"); res.exit != "0" {
		t.Errorf("command through the published execd port = %+v", res)
	}
	// The network is the operator's: New never changes it.
	if nw := networkOf(t, name); nw.Options[iccOption] != "" || nw.Labels[labelManagedNetwork] != "" {
		t.Errorf("custom network was changed: options %v labels %v", nw.Options, nw.Labels)
	}

	_, err = New(testCtx(t), Options{Client: env.cli, ExecdPath: env.execd, NetworkMode: "host"})
	if err != nil {
		t.Errorf("New in host mode: %v", err)
	}
	// "none" is a network of the null driver, not a bridge.
	o := Options{Client: env.cli, ExecdPath: env.execd}
	if err := o.setDefaults(); err != nil {
		t.Fatal(err)
	}
	o.NetworkMode = "none" // past setDefaults, which refuses the name
	rn := &Runtime{cli: env.cli, opts: o, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err = rn.setupNetwork(testCtx(t))
	wantClass(t, "setupNetwork on a null-driver network", err, runtime.ErrInvalid)
	if err != nil && !strings.Contains(err.Error(), "driver") {
		t.Errorf("error %q does not name the driver", err)
	}
}

// TestNetworkRecheck: a create checks that the network's name still
// means the network validated at start. Pruned while unused, the managed
// network is created again (once, by concurrent creates); replaced by one
// whose containers reach each other, creates fail with the start's error
// before any container exists, until it is removed again.
func TestNetworkRecheck(t *testing.T) {
	needEngine(t)
	name := testNetwork(t)
	r := newTestRuntime(t, func(o *Options) { o.BridgeNetwork = name })
	first := networkOf(t, name).ID

	// docker network prune removes it: nothing is on it.
	if out, err := dockerRun("network", "rm", name); err != nil {
		t.Fatalf("docker network rm: %v\n%s", err, out)
	}
	specs := []runtime.Spec{baseSpec(t), baseSpec(t), baseSpec(t)}
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i, spec := range specs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, errs[i] = r.Create(ctx, spec)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Create #%d after the network was removed: %v", i, err)
		}
	}
	if ids := strings.Fields(dockerOut("network", "ls", "-q", "--filter", "name=^"+name+"$")); len(ids) != 1 {
		t.Fatalf("networks named %s after concurrent creates: %q; want exactly one", name, ids)
	}
	nw := networkOf(t, name)
	if nw.ID == first || nw.Options[iccOption] != "false" || nw.Labels[labelManagedNetwork] != "true" {
		t.Errorf("recreated network %s: options %v labels %v; want a new one with %s=false and %s=true",
			shortID(nw.ID), nw.Options, nw.Labels, iccOption, labelManagedNetwork)
	}
	for _, spec := range specs {
		if mode, nets := attachedTo(t, spec.ID); mode != nw.ID || !slices.Equal(nets, []string{name}) {
			t.Errorf("sandbox %s: network mode %q on %q; want %s on [%s]", spec.ID, mode, nets, nw.ID, name)
		}
	}
	if res := run(t, r, specs[0].ID, specs[0].ExecdToken, "echo hi"); res.exit != "0" {
		t.Errorf("command in a sandbox on the recreated network = %+v", res)
	}
	for _, spec := range specs {
		if err := r.Delete(testCtx(t), spec.ID); err != nil {
			t.Fatalf("Delete(%s): %v", spec.ID, err)
		}
	}

	// Someone recreates it with the engine's defaults: ICC on.
	if out, err := dockerRun("network", "rm", name); err != nil {
		t.Fatalf("docker network rm: %v\n%s", err, out)
	}
	if out, err := dockerRun("network", "create", "--driver", "bridge", name); err != nil {
		t.Fatalf("docker network create: %v\n%s", err, out)
	}
	open := networkOf(t, name).ID
	for range 2 { // refused every time, not only the first
		spec := baseSpec(t)
		_, err := r.Create(testCtx(t), spec)
		wantClass(t, "Create on a replaced network with ICC on", err, runtime.ErrInvalid)
		for _, w := range []string{name, iccOption, "docker network rm " + name, "isolate_sandboxes = false"} {
			if err != nil && !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not contain %q", err, w)
			}
		}
		if containerExists(containerName(spec.ID)) {
			t.Errorf("Create on a network with ICC on left container %s", containerName(spec.ID))
		}
	}
	if nw := networkOf(t, name); nw.ID != open || len(nw.Containers) != 0 {
		t.Errorf("the refused network was changed or used: id %s containers %v", shortID(nw.ID), nw.Containers)
	}

	// Removed again, the next create makes an isolated one.
	if out, err := dockerRun("network", "rm", name); err != nil {
		t.Fatalf("docker network rm: %v\n%s", err, out)
	}
	mustCreate(t, r, baseSpec(t))
	if nw := networkOf(t, name); nw.Options[iccOption] != "false" {
		t.Errorf("network after removing the refused one: options %v; want %s=false", nw.Options, iccOption)
	}
}

// TestCustomNetworkRecheck: a user-defined network replaced by another
// bridge of the name is used; once it is gone, creates fail.
func TestCustomNetworkRecheck(t *testing.T) {
	needEngine(t)
	name := testNetwork(t)
	if out, err := dockerRun("network", "create", "--driver", "bridge", name); err != nil {
		t.Fatalf("docker network create: %v\n%s", err, out)
	}
	r := newTestRuntime(t, func(o *Options) { o.NetworkMode = name })
	for _, args := range [][]string{{"network", "rm", name}, {"network", "create", "--driver", "bridge", name}} {
		if out, err := dockerRun(args...); err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	if mode, _ := attachedTo(t, spec.ID); mode != networkOf(t, name).ID {
		t.Errorf("sandbox network mode %q, want the id of %s", mode, name)
	}
	if err := r.Delete(testCtx(t), spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if out, err := dockerRun("network", "rm", name); err != nil {
		t.Fatalf("docker network rm: %v\n%s", err, out)
	}
	spec = baseSpec(t)
	_, err := r.Create(testCtx(t), spec)
	wantClass(t, "Create on a removed custom network", err, runtime.ErrInvalid)
	if err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("error %q does not say that network %s does not exist", err, name)
	}
	if containerExists(containerName(spec.ID)) {
		t.Errorf("Create on a missing network left container %s", containerName(spec.ID))
	}
	if _, err := env.cli.NetworkInspect(testCtx(t), name, network.InspectOptions{}); err == nil {
		t.Errorf("a custom network was created by the runtime")
	}
}

// createDuplicate makes a network of a name that may already exist, as
// racing creates do on engines before API 1.44; the client package
// always asks those to refuse duplicates, so the request is sent as is.
func createDuplicate(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	if v := env.cli.ClientVersion(); !versions.LessThan(v, "1.44") {
		t.Skipf("engine API %s refuses networks of a name in use", v)
	}
	body, _ := json.Marshal(map[string]any{"Name": name, "Driver": bridgeDriver, "CheckDuplicate": false,
		"Options": map[string]string{iccOption: "false"}, "Labels": labels})
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, "http://docker/v"+env.cli.ClientVersion()+"/networks/create", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := env.cli.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("create network %s: %v", name, err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.ID == "" {
		t.Fatalf("create network %s: %s %v", name, resp.Status, err)
	}
	time.Sleep(1100 * time.Millisecond) // Created has a resolution of a second on some engines: keep the order certain
	return out.ID
}

// TestDuplicateNetworks: of several networks of the managed name only
// labelled ones made after the oldest are removed; another one makes New
// fail with the names and the fix.
func TestDuplicateNetworks(t *testing.T) {
	needEngine(t)
	managed := map[string]string{labelManagedNetwork: "true"}

	name := testNetwork(t)
	kept := createDuplicate(t, name, nil)
	dup := createDuplicate(t, name, managed)
	r := newTestRuntime(t, func(o *Options) { o.BridgeNetwork = name })
	if _, err := env.cli.NetworkInspect(testCtx(t), dup, network.InspectOptions{}); err == nil {
		t.Errorf("the labelled duplicate %s was not removed", shortID(dup))
	}
	if got := networkOf(t, name).ID; got != kept {
		t.Errorf("network %s is %s, want the oldest %s", name, shortID(got), shortID(kept))
	}
	if r.networkID != kept {
		t.Errorf("runtime validated %s, want %s", shortID(r.networkID), shortID(kept))
	}

	name = testNetwork(t)
	createDuplicate(t, name, managed)
	foreign := createDuplicate(t, name, nil)
	_, err := New(testCtx(t), Options{Client: env.cli, ExecdPath: env.execd, BridgeNetwork: name})
	wantClass(t, "New with an unlabelled duplicate", err, runtime.ErrInvalid)
	for _, w := range []string{name, shortID(foreign), "docker network rm " + shortID(foreign), labelManagedNetwork} {
		if err != nil && !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if _, err := env.cli.NetworkInspect(testCtx(t), foreign, network.InspectOptions{}); err != nil {
		t.Errorf("the unlabelled duplicate was removed: %v", err)
	}
}
