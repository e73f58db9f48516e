package docker

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestCreateBindMount(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	spec := baseSpec(t)
	spec.Entrypoint = []string{"sh", "-c", "echo entrypoint-started; exec sleep 100000"}
	spec.Env = map[string]string{"GREETING": "hello world", "EXECD_ACCESS_TOKEN": "user-must-not-override"}
	spec.Metadata = map[string]string{"project": "apollo", "team.name": "x"}
	exp := time.Now().Add(time.Hour).Round(0)
	spec.ExpiresAt = &exp
	spec.Resources = runtime.Resources{NanoCPUs: 500_000_000, MemoryBytes: 64 << 20}
	spec.Platform = &runtime.Platform{OS: "linux", Arch: "amd64"}
	if got := mustCreate(t, r, spec); got.State != sandbox.StateRunning {
		t.Fatalf("Create state = %s (%s %s), want Running", got.State, got.Reason, got.Message)
	}

	sb, err := r.Get(ctx, spec.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !reflect.DeepEqual(sb.Entrypoint, spec.Entrypoint) {
		t.Errorf("Get entrypoint = %q, want %q unchanged", sb.Entrypoint, spec.Entrypoint)
	}
	if !reflect.DeepEqual(sb.Metadata, spec.Metadata) {
		t.Errorf("Get metadata = %v, want %v (image labels must not leak in)", sb.Metadata, spec.Metadata)
	}
	if sb.ExpiresAt == nil || !sb.ExpiresAt.Equal(exp) {
		t.Errorf("Get expiresAt = %v, want %v", sb.ExpiresAt, exp)
	}
	if sb.Image != env.image || sb.ExecdToken != spec.ExecdToken || sb.State != sandbox.StateRunning || sb.Reason != "CONTAINER_RUNNING" {
		t.Errorf("Get = image %q token %q state %s/%s", sb.Image, sb.ExecdToken, sb.State, sb.Reason)
	}
	if sb.Platform == nil || *sb.Platform != *spec.Platform {
		t.Errorf("Get platform = %v, want %v", sb.Platform, spec.Platform)
	}
	if time.Since(sb.CreatedAt) > time.Minute || sb.LastTransitionAt.Before(sb.CreatedAt) {
		t.Errorf("Get createdAt %v lastTransitionAt %v", sb.CreatedAt, sb.LastTransitionAt)
	}

	list, err := r.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(list, func(s runtime.Sandbox) bool { return s.ID == spec.ID })
	if i < 0 {
		t.Fatalf("List does not hold %s", spec.ID)
	}
	l := list[i]
	if !reflect.DeepEqual(l.Entrypoint, spec.Entrypoint) || !reflect.DeepEqual(l.Metadata, spec.Metadata) ||
		l.ExpiresAt == nil || !l.ExpiresAt.Equal(exp) || l.State != sandbox.StateRunning || !l.CreatedAt.Equal(sb.CreatedAt) {
		t.Errorf("List entry = %+v, want it to match Get %+v", l, sb)
	}

	res := run(t, r, spec.ID, spec.ExecdToken, "echo hi; echo \"$GREETING\"; echo ${EXECD_ACCESS_TOKEN:-unset}")
	if want := []string{"hi", "hello world", "unset"}; !reflect.DeepEqual(res.stdout, want) || res.exit != "0" {
		t.Errorf("command output = %q exit %s, want %q exit 0", res.stdout, res.exit, want)
	}
	a, _ := r.Address(ctx, spec.ID, 44772)
	if code, _, err := get(a, "/ping", "wrong", 2*time.Second); err != nil || code != 401 {
		t.Errorf("ping with a wrong token = %d %v, want 401", code, err)
	}

	raw, err := r.Inspect(ctx, spec.ID)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if strings.Contains(string(raw), spec.ExecdToken) {
		t.Errorf("Inspect output holds the execd token")
	}
	var ins struct {
		HostConfig struct {
			NanoCpus, Memory, MemorySwap int64
			PidsLimit                    *int64
			CapDrop, SecurityOpt         []string
			Init                         *bool
		}
		Mounts []inspectMount
	}
	if err := json.Unmarshal(raw, &ins); err != nil {
		t.Fatalf("Inspect output: %v", err)
	}
	hc := ins.HostConfig
	if hc.NanoCpus != 500_000_000 || hc.Memory != 64<<20 || hc.MemorySwap != 64<<20 || hc.PidsLimit == nil || *hc.PidsLimit != defaultPidsLimit {
		t.Errorf("resources = cpu %d mem %d swap %d pids %v", hc.NanoCpus, hc.Memory, hc.MemorySwap, hc.PidsLimit)
	}
	for _, c := range DefaultDropCapabilities {
		if !slices.Contains(hc.CapDrop, c) && !slices.Contains(hc.CapDrop, "CAP_"+c) {
			t.Errorf("CapDrop %v lacks %s", hc.CapDrop, c)
		}
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") || hc.Init == nil || *hc.Init {
		t.Errorf("SecurityOpt %v Init %v", hc.SecurityOpt, hc.Init)
	}
	if i := slices.IndexFunc(ins.Mounts, func(m inspectMount) bool { return m.Destination == execdInContainer }); i < 0 ||
		ins.Mounts[i].RW || ins.Mounts[i].Type != "bind" {
		t.Errorf("execd mount = %+v, want a read-only bind at %s", ins.Mounts, execdInContainer)
	}

	logs, err := r.Logs(ctx, spec.ID, runtime.LogOptions{Tail: 10})
	if err != nil || !strings.Contains(string(logs), "entrypoint-started") {
		t.Errorf("Logs = %q, %v; want the entrypoint's output", logs, err)
	}
	evs, err := r.Events(ctx, spec.ID, 0)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	var actions []string
	for _, e := range evs {
		actions = append(actions, e.Action)
	}
	if !slices.Contains(actions, "create") || !slices.Contains(actions, "start") {
		t.Errorf("Events actions = %q, want create and start", actions)
	}
	if evs, err := r.Events(ctx, spec.ID, 1); err != nil || len(evs) != 1 {
		t.Errorf("Events(limit 1) = %d events, %v", len(evs), err)
	}

	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if containerExists(containerName(spec.ID)) {
		t.Errorf("container %s still exists after Delete", containerName(spec.ID))
	}
	_, err = r.Get(ctx, spec.ID)
	wantClass(t, "Get after Delete", err, runtime.ErrNotFound)
	wantClass(t, "second Delete", r.Delete(ctx, spec.ID), runtime.ErrNotFound)
}

func TestCreateExecdCopy(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, func(o *Options) { o.ExecdCopy = true })
	ctx := testCtx(t)
	spec := baseSpec(t)
	spec.ExpiresAt = nil
	mustCreate(t, r, spec)
	res := run(t, r, spec.ID, spec.ExecdToken, "stat -c %a /opt/opensandbox/execd; echo ok")
	if want := []string{"755", "ok"}; !reflect.DeepEqual(res.stdout, want) {
		t.Errorf("command output = %q (stderr %q), want %q", res.stdout, res.stderr, want)
	}
	c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.Mounts {
		if m.Destination == execdInContainer {
			t.Errorf("ExecdCopy runtime mounted execd: %+v", m)
		}
	}
	sb, err := r.Get(ctx, spec.ID)
	if err != nil || sb.ExpiresAt != nil || c.Config.Labels[labelManualCleanup] != "true" {
		t.Errorf("manual cleanup sandbox: expiresAt %v labels %v err %v", sb.ExpiresAt, c.Config.Labels, err)
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func TestHostNetwork(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, func(o *Options) { o.NetworkMode = "host" })
	ctx := testCtx(t)
	spec := baseSpec(t)
	mustCreate(t, r, spec)
	c, err := env.cli.ContainerInspect(ctx, containerName(spec.ID))
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Address(ctx, spec.ID, 44772)
	if err != nil || a.Host != "127.0.0.1" || a.PathPrefix != "" || a.Port == 44772 || c.Config.Labels[labelExecdPort] != itoa(a.Port) {
		t.Errorf("Address(44772) in host mode = %+v, %v; label %q", a, err, c.Config.Labels[labelExecdPort])
	}
	if res := run(t, r, spec.ID, spec.ExecdToken, "echo host"); !reflect.DeepEqual(res.stdout, []string{"host"}) {
		t.Errorf("command in host mode = %q", res.stdout)
	}
	if a, err := r.Address(ctx, spec.ID, 3000); err != nil || a.Port != 3000 || a.PathPrefix != "" {
		t.Errorf("Address(3000) in host mode = %+v, %v", a, err)
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
}

// inspectMount is one entry of Mounts in the engine's inspect output.
type inspectMount struct {
	Type, Source, Destination string
	RW                        bool
}
