package docker

import (
	"fmt"
	"sort"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// labelVersionsPrefix starts the labels with which an image declares the
// versions of a language runtime it has, e.g.
// io.opensandbox.versions.python=3.11.2 (several are separated by spaces).
// images/build.sh sets them on opensandbox/code-interpreter, whose
// entrypoint selects a runtime by PYTHON_VERSION, JAVA_VERSION,
// NODE_VERSION and GO_VERSION, as upstream's image does.
const labelVersionsPrefix = "io.opensandbox.versions."

// checkVersions refuses a spec whose <LANG>_VERSION variable names a
// version the image does not declare. The image's entrypoint refuses it
// too, but only once the container runs, which can be after execd
// answered: checked here, the create fails every time, before anything
// is made, and says which versions there are.
func checkVersions(spec runtime.Spec, ref string, labels map[string]string) error {
	var bad []string
	for k, have := range labels {
		lang, ok := strings.CutPrefix(k, labelVersionsPrefix)
		if !ok || lang == "" {
			continue
		}
		name := strings.ToUpper(lang) + "_VERSION"
		want := spec.Env[name]
		if strings.TrimSpace(want) == "" {
			continue
		}
		versions := strings.Fields(have)
		if versionMatch(want, versions) == "" {
			bad = append(bad, fmt.Sprintf("%s=%s, but the image has %s %s", name, want, lang, strings.Join(versions, ", ")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	image := ref
	if spec.SnapshotID != "" {
		image = "of snapshot " + spec.SnapshotID
	}
	return fmt.Errorf("docker: sandbox %s: image %s does not have the runtime version asked for: %s: %w",
		spec.ID, image, strings.Join(bad, "; "), runtime.ErrInvalid)
}

// versionMatch returns the first of versions that want selects, or "".
// want selects a version it equals or is a dotted prefix of ("3" and
// "3.11" select 3.11.2, "3.1" does not); a leading "v" is ignored, as in
// NODE_VERSION=v18. The image's entrypoint applies the same rule.
func versionMatch(want string, versions []string) string {
	want = strings.TrimPrefix(strings.TrimSpace(want), "v")
	if want == "" {
		return ""
	}
	for _, v := range versions {
		if v == want || strings.HasPrefix(v, want+".") {
			return v
		}
	}
	return ""
}
