// Package committer holds the parts of the image committer
// (cmd/image-committer) that do not talk to containerd: its command-line
// targets, the result it writes to the termination message, registry
// credentials from a docker config file, and the new image's config and
// manifest. The controller imports it to read the result, without pulling
// the containerd client into its own binary.
package committer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Target is one container to commit: its name in the pod, its containerd ID
// and the image reference to push its root filesystem to.
type Target struct {
	Name        string
	ContainerID string
	Ref         string
}

// String is the command-line form NAME=CONTAINER-ID=REF.
func (t Target) String() string { return t.Name + "=" + t.ContainerID + "=" + t.Ref }

// ParseTarget reads NAME=CONTAINER-ID=REF. A "containerd://" prefix of the
// ID, as in a pod's status.containerStatuses[].containerID, is dropped.
func ParseTarget(s string) (Target, error) {
	parts := strings.SplitN(s, "=", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Target{}, fmt.Errorf("target %q: want NAME=CONTAINER-ID=IMAGE-REF", s)
	}
	id := strings.TrimPrefix(parts[1], "containerd://")
	if strings.Contains(id, "://") {
		return Target{}, fmt.Errorf("target %q: container ID %q is not a containerd one", s, parts[1])
	}
	return Target{Name: parts[0], ContainerID: id, Ref: parts[2]}, nil
}

// ContainerResult is the image one container was committed and pushed to.
type ContainerResult struct {
	ContainerName string `json:"containerName"`
	ImageURI      string `json:"imageUri"`
	ImageDigest   string `json:"imageDigest"`
	// LayerSize is the compressed size of the new layer in bytes.
	LayerSize int64 `json:"layerSize"`
}

// Result is what the committer writes to its termination message: the
// images on success, Error on failure.
type Result struct {
	Containers []ContainerResult `json:"containers,omitempty"`
	Error      string            `json:"error,omitempty"`
}

// MaxMessage is the size Kubernetes keeps of a termination message.
const MaxMessage = 4096

// Encode renders r for the termination message, cutting a long error so
// that the whole stays within MaxMessage and is still valid JSON.
func (r Result) Encode() []byte {
	b, _ := json.Marshal(r)
	for len(b) > MaxMessage && r.Error != "" {
		cut := len(r.Error) - (len(b) - MaxMessage) - 16
		if cut < 0 {
			cut = 0
		}
		r.Error = r.Error[:cut] + "…"
		b, _ = json.Marshal(r)
	}
	return b
}

// ParseResult reads a termination message written by Encode.
func ParseResult(msg string) (Result, error) {
	var r Result
	if strings.TrimSpace(msg) == "" {
		return r, errors.New("empty termination message")
	}
	if err := json.Unmarshal([]byte(msg), &r); err != nil {
		return r, fmt.Errorf("reading the committer's result %q: %w", truncate(msg, 200), err)
	}
	return r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// DockerConfig is the part of a docker config.json (a
// kubernetes.io/dockerconfigjson secret's .dockerconfigjson) that holds
// registry credentials. The older .dockercfg form is the auths map alone.
type DockerConfig struct {
	Auths map[string]DockerAuth `json:"auths"`
}

// DockerAuth is one registry's credentials.
type DockerAuth struct {
	Auth          string `json:"auth,omitempty"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

// ParseDockerConfig reads a config.json, or the older .dockercfg map.
func ParseDockerConfig(data []byte) (DockerConfig, error) {
	var c DockerConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("reading the registry credentials: %w", err)
	}
	if c.Auths == nil {
		var old map[string]DockerAuth
		if err := json.Unmarshal(data, &old); err == nil {
			c.Auths = old
		}
	}
	return c, nil
}

// Credentials returns the user name and secret for host ("127.0.0.1:5000",
// "registry.example"), matching keys written as URLs too
// ("https://host/v1/"). An identity token comes back with an empty user, as
// registries' token endpoints expect. No entry is no error: anonymous.
func (c DockerConfig) Credentials(host string) (string, string, error) {
	for key, a := range c.Auths {
		if normalizeHost(key) != host {
			continue
		}
		if a.IdentityToken != "" {
			return "", a.IdentityToken, nil
		}
		if a.Username != "" || a.Password != "" {
			return a.Username, a.Password, nil
		}
		if a.Auth == "" {
			return "", "", nil
		}
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return "", "", fmt.Errorf("registry credentials for %s: auth is not base64: %w", host, err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return "", "", fmt.Errorf("registry credentials for %s: auth is not user:password", host)
		}
		return user, pass, nil
	}
	return "", "", nil
}

// normalizeHost turns a config key ("https://index.docker.io/v1/",
// "host:5000") into a host name with port.
func normalizeHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	if i := strings.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	if key == "index.docker.io" {
		return "registry-1.docker.io"
	}
	return key
}

// CommitConfig returns the config of the committed image: base's config
// (entrypoint, environment, working directory... unchanged) with the new
// layer's uncompressed digest appended to its root filesystem and a history
// entry saying what made it.
func CommitConfig(base ocispec.Image, diffID digest.Digest, created time.Time, comment string) ocispec.Image {
	img := base
	img.Created = &created
	img.RootFS.Type = "layers"
	img.RootFS.DiffIDs = append(append([]digest.Digest(nil), base.RootFS.DiffIDs...), diffID)
	// History entries without empty_layer must match the layers one to
	// one; an image imported without history gets none added.
	if len(base.History) > 0 {
		img.History = append(append([]ocispec.History(nil), base.History...), ocispec.History{
			Created: &created, CreatedBy: "opensandbox image-committer", Comment: comment,
		})
	}
	return img
}

// OCI media types for Docker's, so that a manifest made from a Docker
// image lists its layers in the OCI vocabulary.
var ociMediaType = map[string]string{
	"application/vnd.docker.image.rootfs.diff.tar.gzip":         ocispec.MediaTypeImageLayerGzip,
	"application/vnd.docker.image.rootfs.diff.tar":              ocispec.MediaTypeImageLayer,
	"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip": ocispec.MediaTypeImageLayerNonDistributableGzip, //nolint:staticcheck // kept as the image had it
	"application/vnd.docker.container.image.v1+json":            ocispec.MediaTypeImageConfig,
}

// OCIMediaType returns the OCI media type for a Docker one, and others
// unchanged.
func OCIMediaType(mt string) string {
	if o, ok := ociMediaType[mt]; ok {
		return o
	}
	return mt
}

// CommitManifest returns the OCI manifest of the committed image: base's
// layers (in OCI media types), then layer, with config as its config.
func CommitManifest(base ocispec.Manifest, config, layer ocispec.Descriptor) ocispec.Manifest {
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    config,
	}
	m.Config.MediaType = ocispec.MediaTypeImageConfig
	for _, l := range base.Layers {
		l.MediaType = OCIMediaType(l.MediaType)
		m.Layers = append(m.Layers, l)
	}
	layer.MediaType = OCIMediaType(layer.MediaType)
	m.Layers = append(m.Layers, layer)
	return m
}

// GCLabels are the containerd content labels that keep a manifest's config
// and layers from being garbage-collected while the manifest is.
func GCLabels(m ocispec.Manifest) map[string]string {
	labels := map[string]string{"containerd.io/gc.ref.content.config": m.Config.Digest.String()}
	for i, l := range m.Layers {
		labels[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i)] = l.Digest.String()
	}
	return labels
}
