package kubernetes

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/opensandbox-go/opensandbox/internal/egress/egressenv"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// The egress sidecar of a sandbox with a network policy: a native sidecar
// (an init container with restartPolicy Always) of the sandbox's pod,
// first of the init containers, running the egress binary. It is the only
// container of the pod with NET_ADMIN. The kubelet starts the next
// container only once its startup probe passed, which /healthz answers
// after the firewall of the pod's network namespace (shared by all its
// containers) is programmed: nothing of the user runs before.
//
// Failing closed: the sidecar ties the namespace's egress to its process
// (package nft's liveness table, which the kernel deletes when the process
// exits, SIGKILL included); while it is gone the pod sends nothing but
// loopback. The kubelet restarts it (restartPolicy Always) in the same
// network namespace, and the new process programs the policy it finds in
// its policy file (an emptyDir of its own, so the policy of the last
// PATCH, not the one the sandbox was created with), as the first one did.
const (
	egressContainer   = "egress"
	egressCAVolume    = "opensandbox-egress-ca"
	egressStateVolume = "opensandbox-egress-state"
	egressCADir       = "/run/opensandbox/egress"
	egressCAFile      = egressCADir + "/ca.pem"
	egressStateDir    = "/var/lib/opensandbox-egress"
	egressPolicyFile  = egressStateDir + "/policy.json"
	// egressCAEnv points execd at the CA to trust (cmd/execd).
	egressCAEnv = "OPENSANDBOX_EGRESS_CA_FILE"
	// DefaultEgressImage is the default of Options.EgressImage.
	DefaultEgressImage = "opensandbox/egress:latest"
)

// The sidecar's resources: a small request, the Docker driver's limit.
var (
	egressRequests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("16Mi"),
	}
	egressLimits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
)

// netCaps are the capabilities no container but the sidecar may hold in a
// sandbox with a network policy: NET_ADMIN changes the firewall, NET_RAW
// sends packets of any kind.
var netCaps = []corev1.Capability{"NET_ADMIN", "NET_RAW"}

// checkEgressTemplate refuses a base pod template in which the sidecar
// cannot be the only one to control the pod's network.
func checkEgressTemplate(id string, ps *corev1.PodSpec) error {
	if ps.HostNetwork {
		return fmt.Errorf("kubernetes: sandbox %s: a network policy needs a pod network of its own, and the pod template sets hostNetwork: %w", id, runtime.ErrNotSupported)
	}
	for _, list := range [][]corev1.Container{ps.InitContainers, ps.Containers} {
		for _, c := range list {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				return fmt.Errorf("kubernetes: sandbox %s: a network policy cannot be enforced on a pod whose container %s is privileged: %w", id, c.Name, runtime.ErrNotSupported)
			}
		}
	}
	return nil
}

// addEgress puts the egress sidecar of spec into ps, whose container main
// (index i) runs execd, and takes the network capabilities away from every
// other container.
func (r *Runtime) addEgress(ps *corev1.PodSpec, i int, spec runtime.Spec) error {
	if err := checkEgressTemplate(spec.ID, ps); err != nil {
		return err
	}
	env, err := r.egressEnv(spec)
	if err != nil {
		return err
	}
	// No process of another container may see (or ptrace) the sidecar's.
	ps.ShareProcessNamespace = ptr.To(false)
	ps.Volumes = append(slices.DeleteFunc(ps.Volumes, func(v corev1.Volume) bool {
		return v.Name == egressCAVolume || v.Name == egressStateVolume
	}),
		corev1.Volume{Name: egressCAVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: egressStateVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	for j := range ps.InitContainers {
		dropNetCaps(&ps.InitContainers[j])
	}
	for j := range ps.Containers {
		dropNetCaps(&ps.Containers[j])
	}
	startup := int32(r.opts.CreateTimeout.Seconds())
	sc := corev1.Container{
		Name: egressContainer, Image: r.opts.Egress.Image, ImagePullPolicy: r.opts.ImagePullPolicy,
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Env:           env,
		Ports:         []corev1.ContainerPort{{Name: "egress", ContainerPort: sandbox.EgressPort, Protocol: corev1.ProtocolTCP}},
		// An exec probe: /healthz over loopback, which the sidecar's API
		// guard always lets in, whatever address the kubelet's own probes
		// would come from. It runs again after every restart; the pod's
		// main container is not ready while the sidecar is down (its
		// replies are dropped), so no readiness probe of its own.
		StartupProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/egress", "healthcheck"}}},
			PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: max(startup, 10),
		},
		Resources: corev1.ResourceRequirements{Requests: egressRequests.DeepCopy(), Limits: egressLimits.DeepCopy()},
		VolumeMounts: []corev1.VolumeMount{
			{Name: egressCAVolume, MountPath: egressCADir},
			{Name: egressStateVolume, MountPath: egressStateDir},
		},
		SecurityContext: &corev1.SecurityContext{
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			// Capabilities are effective for root only; a template's
			// runAsNonRoot must not turn the sidecar into a no-op.
			RunAsUser:    ptr.To(int64(0)),
			RunAsNonRoot: ptr.To(false),
		},
	}
	// First of the init containers: nothing else of the pod (the
	// template's own init containers included) runs before the firewall.
	ps.InitContainers = append([]corev1.Container{sc}, slices.DeleteFunc(ps.InitContainers, func(c corev1.Container) bool { return c.Name == egressContainer })...)

	c := &ps.Containers[i]
	c.VolumeMounts = append(slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == egressCADir }),
		corev1.VolumeMount{Name: egressCAVolume, MountPath: egressCADir, ReadOnly: true})
	if spec.Egress.CredentialProxy {
		// The sidecar writes the CA before its probe passes, so execd
		// finds it when it starts.
		c.Env = append(slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == egressCAEnv }),
			corev1.EnvVar{Name: egressCAEnv, Value: egressCAFile})
	}
	return nil
}

// dropNetCaps drops NET_ADMIN and NET_RAW from c.
func dropNetCaps(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	s := c.SecurityContext
	if s.Capabilities == nil {
		s.Capabilities = &corev1.Capabilities{}
	}
	s.Capabilities.Add = slices.DeleteFunc(s.Capabilities.Add, func(c corev1.Capability) bool {
		return slices.ContainsFunc(netCaps, func(n corev1.Capability) bool {
			return strings.EqualFold(strings.TrimPrefix(string(c), "CAP_"), string(n))
		})
	})
	for _, n := range netCaps {
		if !slices.Contains(s.Capabilities.Drop, n) && !slices.Contains(s.Capabilities.Drop, "ALL") {
			s.Capabilities.Drop = append(s.Capabilities.Drop, n)
		}
	}
}

// egressEnv is the sidecar's environment (the contract of package
// egressenv); the token comes from the sandbox's Secret.
func (r *Runtime) egressEnv(spec runtime.Spec) ([]corev1.EnvVar, error) {
	e := egressenv.Env{
		SandboxID:       spec.ID,
		Mode:            r.opts.Egress.Mode,
		Rules:           string(spec.Egress.Policy),
		PolicyFile:      egressPolicyFile,
		CredentialProxy: spec.Egress.CredentialProxy,
		CAFile:          egressCAFile,
		DenyWebhook:     r.opts.Egress.DenyWebhook,
		DNSUpstreams:    r.opts.Egress.DNSUpstreams,
		AllowMetadata:   r.opts.Egress.AllowMetadata,
	}
	if r.opts.Egress.BlockDoH {
		e.BlockDoH = true
		for _, s := range r.opts.Egress.DoHBlocklist {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, aerr := netip.ParseAddr(s)
				if aerr != nil {
					return nil, fmt.Errorf("kubernetes: egress DoH blocklist: %q is not an IP or CIDR: %w", s, runtime.ErrInvalid)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			e.DoHBlocklist = append(e.DoHBlocklist, p)
		}
	}
	var out []corev1.EnvVar
	for _, kv := range e.Encode() {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	if spec.Egress.Token != "" {
		out = append(out, corev1.EnvVar{Name: egressenv.VarToken, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: spec.ID}, Key: keyEgressToken,
		}}})
	}
	return out, nil
}
