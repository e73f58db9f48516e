package kubernetes

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/opensandbox-go/opensandbox/internal/egress/egressenv"
	"github.com/opensandbox-go/opensandbox/internal/egress/sidecar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func egressSpec() runtime.Spec {
	s := testSpec()
	s.Egress = &runtime.Egress{Policy: []byte(`{"defaultAction":"deny","egress":[{"action":"allow","target":"10.1.2.3"}]}`), Token: "egress-secret"}
	return s
}

func hasCap(list []corev1.Capability, c corev1.Capability) bool { return slices.Contains(list, c) }

func TestEgressPod(t *testing.T) {
	r := testRuntime()
	r.opts.Egress.Mode = "dns+nft"
	r.opts.Egress.DNSUpstreams = []string{"10.96.0.10"}
	r.base = corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "site-init", Image: "init:1"}},
		Containers: []corev1.Container{{Name: "helper", Image: "helper:1", SecurityContext: &corev1.SecurityContext{
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "SYS_TIME", "CAP_NET_RAW"}}}}},
	}}
	spec := egressSpec()
	if err := validate(spec); err != nil {
		t.Fatalf("a spec with a network policy: %v", err)
	}
	if s := r.tokenSecret(spec); string(s.Data[keyEgressToken]) != "egress-secret" {
		t.Errorf("token secret %v", s.Data)
	}
	b, err := r.batchSandbox(spec, spec.Image, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := b.Spec.Template.Spec
	names := func(cs []corev1.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	// The sidecar comes before every other init container, the template's too.
	if got := names(ps.InitContainers); !slices.Equal(got, []string{egressContainer, "site-init", initContainer}) {
		t.Fatalf("init containers %q", got)
	}
	sc := ps.InitContainers[0]
	if sc.Image != DefaultEgressImage || sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("sidecar image %q restartPolicy %v: want a native sidecar of %s", sc.Image, sc.RestartPolicy, DefaultEgressImage)
	}
	if sc.StartupProbe == nil || sc.StartupProbe.Exec == nil || !slices.Equal(sc.StartupProbe.Exec.Command, []string{"/egress", "healthcheck"}) {
		t.Errorf("sidecar startup probe %+v", sc.StartupProbe)
	}
	if len(sc.Ports) != 1 || sc.Ports[0].ContainerPort != sandbox.EgressPort {
		t.Errorf("sidecar ports %+v", sc.Ports)
	}
	sec := sc.SecurityContext
	if sec == nil || sec.Capabilities == nil || !slices.Equal(sec.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) ||
		!hasCap(sec.Capabilities.Drop, "ALL") || sec.Privileged != nil || sec.RunAsUser == nil || *sec.RunAsUser != 0 {
		t.Errorf("sidecar security context %+v", sec)
	}
	if ps.ShareProcessNamespace == nil || *ps.ShareProcessNamespace {
		t.Errorf("shareProcessNamespace %v, want false", ps.ShareProcessNamespace)
	}

	// Nothing else holds NET_ADMIN or NET_RAW.
	for _, c := range append(slices.Clone(ps.InitContainers[1:]), ps.Containers...) {
		s := c.SecurityContext
		if s == nil || s.Capabilities == nil || !hasCap(s.Capabilities.Drop, "NET_ADMIN") || !hasCap(s.Capabilities.Drop, "NET_RAW") {
			t.Errorf("container %s: security context %+v, want NET_ADMIN and NET_RAW dropped", c.Name, s)
			continue
		}
		for _, a := range s.Capabilities.Add {
			if a == "NET_ADMIN" || a == "NET_RAW" || a == "CAP_NET_RAW" {
				t.Errorf("container %s still adds %s", c.Name, a)
			}
		}
	}
	if h := ps.Containers[slices.IndexFunc(ps.Containers, func(c corev1.Container) bool { return c.Name == "helper" })]; !hasCap(h.SecurityContext.Capabilities.Add, "SYS_TIME") {
		t.Errorf("the template's other capabilities were lost: %+v", h.SecurityContext.Capabilities)
	}

	// The environment is the egressenv contract, the token from the Secret.
	env := map[string]string{}
	for _, e := range sc.Env {
		if e.Name == egressenv.VarToken {
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != spec.ID || e.ValueFrom.SecretKeyRef.Key != keyEgressToken {
				t.Errorf("token env %+v, want a secretKeyRef", e)
			}
			env[e.Name] = "egress-secret"
			continue
		}
		env[e.Name] = e.Value
	}
	cfg, err := sidecar.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the sidecar cannot read its environment: %v", err)
	}
	if string(cfg.Policy) != string(spec.Egress.Policy) || cfg.Token != "egress-secret" || cfg.SandboxID != spec.ID ||
		cfg.Mode != "dns+nft" || cfg.PolicyFile != egressPolicyFile || cfg.CAFile != egressCAFile ||
		!slices.Equal(cfg.DNSUpstreams, []string{"10.96.0.10"}) || cfg.CredentialProxy || cfg.StartMarker != "" {
		t.Errorf("sidecar config %+v", cfg)
	}

	// The CA directory: written by the sidecar, read-only in main; the
	// policy file on a volume of the sidecar's own.
	mounts := func(c corev1.Container) map[string]corev1.VolumeMount {
		m := map[string]corev1.VolumeMount{}
		for _, v := range c.VolumeMounts {
			m[v.Name] = v
		}
		return m
	}
	if m := mounts(sc); m[egressCAVolume].MountPath != egressCADir || m[egressCAVolume].ReadOnly || m[egressStateVolume].MountPath != egressStateDir {
		t.Errorf("sidecar mounts %+v", sc.VolumeMounts)
	}
	main := ps.Containers[slices.IndexFunc(ps.Containers, func(c corev1.Container) bool { return c.Name == mainContainer })]
	if m := mounts(main); !m[egressCAVolume].ReadOnly || m[egressCAVolume].MountPath != egressCADir {
		t.Errorf("main mounts %+v", main.VolumeMounts)
	} else if _, ok := m[egressStateVolume]; ok {
		t.Errorf("main mounts the sidecar's state")
	}
	if slices.ContainsFunc(main.Env, func(e corev1.EnvVar) bool { return e.Name == egressCAEnv }) {
		t.Errorf("main trusts an egress CA without the credential proxy")
	}
}

func TestEgressCredentialProxy(t *testing.T) {
	r := testRuntime()
	spec := egressSpec()
	spec.Egress.CredentialProxy = true
	b, err := r.batchSandbox(spec, spec.Image, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := b.Spec.Template.Spec
	i := slices.IndexFunc(ps.Containers, func(c corev1.Container) bool { return c.Name == mainContainer })
	if !slices.ContainsFunc(ps.Containers[i].Env, func(e corev1.EnvVar) bool { return e.Name == egressCAEnv && e.Value == egressCAFile }) {
		t.Errorf("main env %+v, want %s=%s", ps.Containers[i].Env, egressCAEnv, egressCAFile)
	}
	if !slices.ContainsFunc(ps.InitContainers[0].Env, func(e corev1.EnvVar) bool {
		return e.Name == egressenv.VarCredentialProxy && e.Value == "true"
	}) {
		t.Errorf("sidecar env %+v without the credential proxy", ps.InitContainers[0].Env)
	}
}

func TestEgressRefused(t *testing.T) {
	priv := true
	for name, base := range map[string]corev1.PodSpec{
		"host network":    {HostNetwork: true},
		"privileged":      {Containers: []corev1.Container{{Name: mainContainer, SecurityContext: &corev1.SecurityContext{Privileged: &priv}}}},
		"privileged init": {InitContainers: []corev1.Container{{Name: "x", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: &priv}}}},
	} {
		r := testRuntime()
		r.base.Spec = base
		spec := egressSpec()
		if _, err := r.batchSandbox(spec, spec.Image, nil, nil); !errors.Is(err, runtime.ErrNotSupported) {
			t.Errorf("%s: %v, want ErrNotSupported", name, err)
		}
	}
	spec := egressSpec()
	spec.PoolRef = "warm"
	if err := validate(spec); !errors.Is(err, runtime.ErrNotSupported) {
		t.Errorf("pooled with a network policy: %v, want ErrNotSupported", err)
	}
	spec.PoolRef = ""
	r := testRuntime()
	r.opts.Egress.BlockDoH = true
	r.opts.Egress.DoHBlocklist = []string{"not-an-ip"}
	if _, err := r.batchSandbox(spec, spec.Image, nil, nil); err == nil {
		t.Errorf("a bad DoH blocklist was accepted")
	}
}

// Without a policy nothing changes: no sidecar, capabilities untouched.
func TestNoEgressNoSidecar(t *testing.T) {
	r := testRuntime()
	spec := testSpec()
	b, err := r.batchSandbox(spec, spec.Image, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := b.Spec.Template.Spec
	if len(ps.InitContainers) != 1 || ps.InitContainers[0].Name != initContainer || ps.Containers[0].SecurityContext != nil {
		t.Errorf("pod without a policy: init %q, main security %+v", ps.InitContainers[0].Name, ps.Containers[0].SecurityContext)
	}
}
