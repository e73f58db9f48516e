package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Labels the driver keeps on containers and volumes. Everything Get and
// List report comes from them, so the engine is the only record.
const (
	labelPrefix = grammar.ReservedLabelPrefix

	labelID             = labelPrefix + "id"
	labelImage          = labelPrefix + "image"
	labelSnapshotID     = labelPrefix + "snapshot-id"
	labelExpiresAt      = labelPrefix + "expires-at"
	labelManualCleanup  = labelPrefix + "manual-cleanup"
	labelCreatedAt      = labelPrefix + "created-at"
	labelEntrypoint     = labelPrefix + "entrypoint" // JSON array
	labelExecdToken     = labelPrefix + "execd-token"
	labelExecdPort      = labelPrefix + "execd-port" // host network mode only
	labelPlatformOS     = labelPrefix + "platform-os"
	labelPlatformArch   = labelPrefix + "platform-arch"
	labelManagedVolumes = labelPrefix + "managed-volumes" // comma list
	labelResources      = labelPrefix + "resources"       // JSON of runtime.Resources, zeros left out
	// labelMasked lists inherited image labels under our prefix that
	// Create blanked out (comma list); see maskInherited.
	labelMasked = labelPrefix + "masked"
	// labelMetadataPrefix + key holds one user metadata entry.
	labelMetadataPrefix = labelPrefix + "metadata."

	// On volumes the driver created.
	labelManagedBy         = labelPrefix + "managed-by-sandbox"
	labelDeleteWithSandbox = labelPrefix + "delete-with-sandbox"

	// On the sandbox network the driver created (see setupNetwork).
	labelManagedNetwork = labelPrefix + "managed-network"

	// On snapshot images.
	labelSnapshotOf = "io.opensandbox.snapshot-of"
)

// containerName is the engine name of sandbox id. It does not carry the
// id: the engine's embedded DNS answers a reverse lookup of a container's
// address with its name, so any neighbour on the network would learn the
// id, which is what the server's proxy route needs. A hash of the id
// names the container instead; the driver finds containers by this name
// or by their labels.
func containerName(id string) string { return "sandbox-" + nameHash(id) }

// nameHash is the part of engine names that stands for sandbox id.
func nameHash(id string) string {
	sum := sha256.Sum256([]byte("opensandbox.io/container-name\x00" + id))
	return hex.EncodeToString(sum[:12])
}

// snapshotRef is the image a snapshot is stored as.
func snapshotRef(snapshotID string) string { return "opensandbox-snapshots:" + snapshotID }

// specLabels are the labels Create puts on the container of spec.
func (r *Runtime) specLabels(spec runtime.Spec, createdAt time.Time, execdPort string, managed []string) map[string]string {
	l := make(map[string]string, len(r.opts.Labels)+len(spec.Metadata)+12)
	for k, v := range r.opts.Labels {
		l[k] = v
	}
	for k, v := range spec.Metadata {
		l[labelMetadataPrefix+k] = v
	}
	l[labelID] = spec.ID
	l[labelImage] = spec.Image
	l[labelSnapshotID] = spec.SnapshotID
	l[labelCreatedAt] = createdAt.UTC().Format(time.RFC3339Nano)
	ep, _ := json.Marshal(spec.Entrypoint)
	l[labelEntrypoint] = string(ep)
	l[labelExecdToken] = spec.ExecdToken
	if spec.ExpiresAt != nil {
		l[labelExpiresAt] = spec.ExpiresAt.UTC().Format(time.RFC3339Nano)
	} else {
		l[labelManualCleanup] = "true"
	}
	if execdPort != "" {
		l[labelExecdPort] = execdPort
	}
	if spec.Platform != nil {
		l[labelPlatformOS] = spec.Platform.OS
		l[labelPlatformArch] = spec.Platform.Arch
	}
	if len(managed) > 0 {
		l[labelManagedVolumes] = strings.Join(managed, ",")
	}
	if spec.Resources != (runtime.Resources{}) {
		res, _ := json.Marshal(resourcesLabel(spec.Resources))
		l[labelResources] = string(res)
	}
	return l
}

// resourcesLabel is the JSON form of labelResources.
type resourcesLabel struct {
	NanoCPUs    int64 `json:"nanoCPUs,omitempty"`
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	GPUs        int   `json:"gpus,omitempty"`
	DiskBytes   int64 `json:"diskBytes,omitempty"`
}

// maskInherited blanks labels under our prefix that the image carries
// but Create did not set. A container inherits its image's labels, and
// an image committed from a sandbox (or built by anyone) may carry ours:
// unmasked, a snapshot's sandbox would inherit the old sandbox's metadata,
// expiry or managed volumes. Labels cannot be removed, so they are set to
// "" and listed in labelMasked, and readers skip them.
func maskInherited(labels, imageLabels map[string]string) {
	var masked []string
	for k := range imageLabels {
		if !strings.HasPrefix(k, labelPrefix) {
			continue
		}
		if _, ours := labels[k]; ours {
			continue
		}
		labels[k] = ""
		masked = append(masked, k)
	}
	sort.Strings(masked)
	// Always set, so a masked list inherited from the image is replaced.
	labels[labelMasked] = strings.Join(masked, ",")
}

// labelView reads our labels of one container, skipping masked ones.
type labelView struct {
	labels map[string]string
	masked map[string]bool
}

func newLabelView(labels map[string]string) labelView {
	v := labelView{labels: labels}
	if m := labels[labelMasked]; m != "" {
		v.masked = make(map[string]bool)
		for _, k := range strings.Split(m, ",") {
			v.masked[k] = true
		}
	}
	return v
}

func (v labelView) get(key string) (string, bool) {
	if v.masked[key] {
		return "", false
	}
	s, ok := v.labels[key]
	return s, ok
}

func (v labelView) str(key string) string {
	s, _ := v.get(key)
	return s
}

func (v labelView) metadata() map[string]string {
	md := make(map[string]string)
	for k, val := range v.labels {
		if name, ok := strings.CutPrefix(k, labelMetadataPrefix); ok && name != "" && !v.masked[k] {
			md[name] = val
		}
	}
	return md
}

func (v labelView) entrypoint() []string {
	var ep []string
	if s := v.str(labelEntrypoint); s != "" {
		if json.Unmarshal([]byte(s), &ep) != nil {
			return nil
		}
	}
	return ep
}

func (v labelView) managedVolumes() []string {
	s := v.str(labelManagedVolumes)
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (v labelView) platform() *runtime.Platform {
	os, arch := v.str(labelPlatformOS), v.str(labelPlatformArch)
	if os == "" && arch == "" {
		return nil
	}
	return &runtime.Platform{OS: os, Arch: arch}
}

// resources reads labelResources; an unreadable label reads as no limits.
func (v labelView) resources() runtime.Resources {
	var l resourcesLabel
	if s := v.str(labelResources); s == "" || json.Unmarshal([]byte(s), &l) != nil {
		return runtime.Resources{}
	}
	return runtime.Resources{NanoCPUs: l.NanoCPUs, MemoryBytes: l.MemoryBytes, GPUs: l.GPUs, DiskBytes: l.DiskBytes}
}

func (v labelView) time(key string) *time.Time {
	s := v.str(key)
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return &t
}

// sandboxFromLabels fills everything of a Sandbox that labels hold.
func sandboxFromLabels(v labelView) runtime.Sandbox {
	sb := runtime.Sandbox{
		ID:          v.str(labelID),
		Image:       v.str(labelImage),
		SnapshotID:  v.str(labelSnapshotID),
		Entrypoint:  v.entrypoint(),
		Metadata:    v.metadata(),
		Platform:    v.platform(),
		ExecdToken:  v.str(labelExecdToken),
		ExpiresAt:   v.time(labelExpiresAt),
		EgressToken: v.str(labelEgressToken),
		Resources:   v.resources(),
	}
	if t := v.time(labelCreatedAt); t != nil {
		sb.CreatedAt = *t
	}
	return sb
}

// owns reports whether a container with these labels belongs to this
// runtime: it carries our id label and every configured extra label.
func (r *Runtime) owns(labels map[string]string, id string) bool {
	return labels[labelID] == id && id != "" && r.scoped(labels)
}
