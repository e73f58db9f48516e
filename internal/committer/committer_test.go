package committer

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestParseTarget(t *testing.T) {
	got, err := ParseTarget("main=containerd://abc123=127.0.0.1:5000/ns/sbx/main:snap-1")
	if err != nil {
		t.Fatal(err)
	}
	want := Target{Name: "main", ContainerID: "abc123", Ref: "127.0.0.1:5000/ns/sbx/main:snap-1"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if back, err := ParseTarget(got.String()); err != nil || back != got {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{"", "main", "main=abc", "=abc=ref", "main==ref", "main=docker://abc=ref"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
}

func TestResultEncodeBounded(t *testing.T) {
	r := Result{Error: strings.Repeat("é", 5000)}
	b := r.Encode()
	if len(b) > MaxMessage {
		t.Fatalf("encoded %d bytes, more than %d", len(b), MaxMessage)
	}
	back, err := ParseResult(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(back.Error, "éé") || !strings.HasSuffix(back.Error, "…") {
		t.Fatalf("cut error %q…", back.Error[:20])
	}
	ok := Result{Containers: []ContainerResult{{ContainerName: "main", ImageURI: "r/x:1", ImageDigest: "sha256:ab", LayerSize: 3}}}
	back, err = ParseResult(string(ok.Encode()))
	if err != nil || len(back.Containers) != 1 || back.Containers[0] != ok.Containers[0] {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := ParseResult(""); err == nil {
		t.Error("empty message accepted")
	}
	if _, err := ParseResult("exec format error"); err == nil {
		t.Error("non-JSON message accepted")
	}
}

func TestDockerConfigCredentials(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3:cret"))
	cfg, err := ParseDockerConfig([]byte(`{"auths":{
		"127.0.0.1:5000":{"auth":"` + auth + `"},
		"https://index.docker.io/v1/":{"username":"bob","password":"pw"},
		"tok.example":{"identitytoken":"T"},
		"bad.example":{"auth":"%%%"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, user, pass string }{
		{"127.0.0.1:5000", "alice", "s3:cret"},
		{"registry-1.docker.io", "bob", "pw"},
		{"tok.example", "", "T"},
		{"other.example", "", ""},
	} {
		u, p, err := cfg.Credentials(tc.host)
		if err != nil || u != tc.user || p != tc.pass {
			t.Errorf("%s: got %q %q %v, want %q %q", tc.host, u, p, err, tc.user, tc.pass)
		}
	}
	if _, _, err := cfg.Credentials("bad.example"); err == nil {
		t.Error("bad base64 accepted")
	}
	old, err := ParseDockerConfig([]byte(`{"r.example":{"username":"u","password":"p"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if u, p, _ := old.Credentials("r.example"); u != "u" || p != "p" {
		t.Errorf(".dockercfg form: got %q %q", u, p)
	}
	if _, err := ParseDockerConfig([]byte("{")); err == nil {
		t.Error("broken JSON accepted")
	}
}

func TestCommitConfigKeepsTheImage(t *testing.T) {
	l1 := digest.FromString("layer1")
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: "amd64"},
		Config:   ocispec.ImageConfig{Entrypoint: []string{"/bin/sh"}, Env: []string{"A=1"}, WorkingDir: "/w"},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{l1}},
		History:  []ocispec.History{{CreatedBy: "base"}},
	}
	diffID := digest.FromString("new")
	got := CommitConfig(base, diffID, created, "c")
	if len(base.RootFS.DiffIDs) != 1 || len(base.History) != 1 {
		t.Fatal("the base config was modified")
	}
	if want := []digest.Digest{l1, diffID}; len(got.RootFS.DiffIDs) != 2 || got.RootFS.DiffIDs[0] != want[0] || got.RootFS.DiffIDs[1] != want[1] {
		t.Fatalf("diff ids %v", got.RootFS.DiffIDs)
	}
	if got.Config.Entrypoint[0] != "/bin/sh" || got.Config.Env[0] != "A=1" || got.Config.WorkingDir != "/w" || got.OS != "linux" {
		t.Fatalf("config not kept: %+v", got.Config)
	}
	if len(got.History) != 2 || !got.History[1].Created.Equal(created) || !got.Created.Equal(created) {
		t.Fatalf("history %+v", got.History)
	}
	noHist := CommitConfig(ocispec.Image{}, diffID, created, "c")
	if len(noHist.History) != 0 || len(noHist.RootFS.DiffIDs) != 1 {
		t.Fatalf("image without history: %+v", noHist)
	}
}

func TestCommitManifest(t *testing.T) {
	base := ocispec.Manifest{
		MediaType: "application/vnd.docker.distribution.manifest.v2+json",
		Config:    ocispec.Descriptor{MediaType: "application/vnd.docker.container.image.v1+json", Digest: digest.FromString("oldcfg")},
		Layers: []ocispec.Descriptor{
			{MediaType: "application/vnd.docker.image.rootfs.diff.tar.gzip", Digest: digest.FromString("l0"), Size: 10},
			{MediaType: ocispec.MediaTypeImageLayerZstd, Digest: digest.FromString("l1"), Size: 11},
		},
	}
	cfg := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromString("cfg"), Size: 5}
	layer := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromString("new"), Size: 7}
	m := CommitManifest(base, cfg, layer)
	if m.SchemaVersion != 2 || m.MediaType != ocispec.MediaTypeImageManifest || m.Config.Digest != cfg.Digest {
		t.Fatalf("manifest %+v", m)
	}
	wantTypes := []string{ocispec.MediaTypeImageLayerGzip, ocispec.MediaTypeImageLayerZstd, ocispec.MediaTypeImageLayerGzip}
	if len(m.Layers) != 3 {
		t.Fatalf("%d layers", len(m.Layers))
	}
	for i, l := range m.Layers {
		if l.MediaType != wantTypes[i] {
			t.Errorf("layer %d: media type %s, want %s", i, l.MediaType, wantTypes[i])
		}
	}
	if m.Layers[0].Digest != base.Layers[0].Digest || m.Layers[2].Digest != layer.Digest {
		t.Fatal("layers out of order")
	}
	if base.Layers[0].MediaType != "application/vnd.docker.image.rootfs.diff.tar.gzip" {
		t.Fatal("the base manifest was modified")
	}
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), `"schemaVersion":2`) {
		t.Fatalf("json %s", b)
	}
	labels := GCLabels(m)
	if labels["containerd.io/gc.ref.content.config"] != cfg.Digest.String() || labels["containerd.io/gc.ref.content.l.2"] != layer.Digest.String() || len(labels) != 4 {
		t.Fatalf("labels %v", labels)
	}
}
