package docker

import (
	"slices"
	"testing"

	"github.com/docker/docker/api/types/image"
)

func TestLocalRefs(t *testing.T) {
	built := func(name, recipe string, tags ...string) image.Summary {
		return image.Summary{RepoTags: tags, Labels: map[string]string{labelBuiltImage: name, labelRecipe: recipe}}
	}
	imgs := []image.Summary{
		built("code-interpreter", "0123456789ab", "opensandbox/code-interpreter:latest", "opensandbox/code-interpreter:0123456789ab", "opensandbox/code-interpreter:v1.0.2"),
		built("base", "ba5eba5eba5e", "opensandbox/base:v1.0.2", "opensandbox/base:ba5eba5eba5e", "opensandbox/base:latest"),
		built("base", "0ldrecipe000", "opensandbox/base:0ldrecipe000"), // an older recipe, pinned by hash only
		built("base", "fffffffffff1", "opensandbox/base:build-4242"),   // still being checked
		// Not built by images/build.sh: every tag counts, even hash-like.
		{RepoTags: []string{"opensandbox/egress:v1.1.0", "opensandbox/mine:build-7"}, Labels: map[string]string{labelRecipe: "v1.1.0"}},
		{RepoTags: []string{"other/thing:latest", "opensandbox-snapshots:abc", "<none>:<none>"}},
		{RepoTags: []string{"opensandbox/base:latest"}, Labels: map[string]string{labelBuiltImage: "base"}}, // a duplicate tag from a racing list
	}
	got := localRefs(imgs)
	want := []string{
		"opensandbox/base:latest (also v1.0.2)",
		"opensandbox/code-interpreter:latest (also v1.0.2)",
		"opensandbox/egress:v1.1.0", "opensandbox/mine:build-7",
	}
	if !slices.Equal(got, want) {
		t.Errorf("localRefs =\n  %q\nwant\n  %q", got, want)
	}
	if got := localRefs(nil); len(got) != 0 {
		t.Errorf("localRefs(nil) = %q", got)
	}
}

func TestIsBuildTag(t *testing.T) {
	for tag, want := range map[string]bool{"build-1": true, "build-123456": true, "build-": false, "build-x1": false, "latest": false, "rebuild-1": false} {
		if got := isBuildTag(tag); got != want {
			t.Errorf("isBuildTag(%q) = %v, want %v", tag, got, want)
		}
	}
}
