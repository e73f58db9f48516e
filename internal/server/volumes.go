package server

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// execdDir is where the runtime puts execd inside every sandbox; volumes
// must not cover it.
const execdDir = "/opt/opensandbox"

// checkVolumes validates the volumes of a create request and turns them
// into runtime volumes. Host paths come back resolved (symlinks followed
// as far as the path exists) so the runtime mounts what was checked.
func (s *Server) checkVolumes(vols []sandbox.Volume) ([]runtime.Volume, error) {
	var out []runtime.Volume
	names := map[string]bool{}
	mounts := map[string]bool{}
	for i, v := range vols {
		field := fmt.Sprintf("volumes[%d]", i)
		if v.Name == "" {
			return nil, badRequest("%s.name is required", field)
		}
		if err := grammar.CheckDNSLabel(v.Name); err != nil {
			return nil, badRequest("%s.name %v", field, err)
		}
		if names[v.Name] {
			return nil, badRequest("%s.name %q is used by another volume", field, v.Name)
		}
		names[v.Name] = true
		if err := checkMountPath(field, v.MountPath); err != nil {
			return nil, err
		}
		if mounts[v.MountPath] {
			return nil, badRequest("%s.mountPath %q is used by another volume", field, v.MountPath)
		}
		mounts[v.MountPath] = true
		if err := checkSubPath(field, v.SubPath); err != nil {
			return nil, err
		}
		backends := 0
		for _, set := range []bool{v.Host != nil, v.PVC != nil, v.OSSFS != nil} {
			if set {
				backends++
			}
		}
		if backends != 1 {
			return nil, badRequest("%s must have exactly one of host, pvc or ossfs (it has %d)", field, backends)
		}
		rv := runtime.Volume{Name: v.Name, MountPath: v.MountPath, ReadOnly: v.ReadOnly, SubPath: v.SubPath}
		switch {
		case v.Host != nil:
			p, err := s.checkHostPath(field, v.Host.Path, v.SubPath)
			if err != nil {
				return nil, err
			}
			rv.HostPath = p
		case v.PVC != nil:
			if err := grammar.CheckDNSSubdomain(v.PVC.ClaimName); err != nil {
				return nil, badRequest("%s.pvc.claimName is not a DNS-1123 name: %v", field, err)
			}
			rv.ClaimName = v.PVC.ClaimName
			rv.CreateIfNotExists = v.PVC.CreateIfNotExists == nil || *v.PVC.CreateIfNotExists
			rv.DeleteOnTermination = v.PVC.DeleteOnSandboxTermination
		default:
			return nil, notSupported("%s.ossfs: object-storage volumes are not available on this server", field)
		}
		out = append(out, rv)
	}
	return out, nil
}

// checkMountPath wants an absolute, clean path other than "/" that does
// not cover execd's directory.
func checkMountPath(field, p string) error {
	switch {
	case p == "":
		return badRequest("%s.mountPath is required", field)
	case !strings.HasPrefix(p, "/"):
		return badRequest("%s.mountPath %q must be an absolute path", field, p)
	case path.Clean(p) != p:
		return badRequest("%s.mountPath %q is not clean (want %q)", field, p, path.Clean(p))
	case p == "/":
		return badRequest("%s.mountPath must not be /", field)
	case within(p, execdDir) || within(execdDir, p):
		return badRequest("%s.mountPath %q would cover %s, which the platform uses", field, p, execdDir)
	}
	return nil
}

// checkSubPath wants "" or a clean relative path that stays inside the volume.
func checkSubPath(field, sub string) error {
	if sub == "" {
		return nil
	}
	switch {
	case strings.HasPrefix(sub, "/"):
		return badRequest("%s.subPath %q must be relative", field, sub)
	case path.Clean(sub) != sub || sub == ".":
		return badRequest("%s.subPath %q is not clean", field, sub)
	case sub == ".." || strings.HasPrefix(sub, "../"):
		return badRequest("%s.subPath %q must not contain ..", field, sub)
	}
	return nil
}

// checkHostPath checks that host path p (and p joined with subPath) lies
// under one of the allowed host paths once cleaned and, as far as they
// exist, with symlinks resolved. It returns the resolved host path.
func (s *Server) checkHostPath(field, p, sub string) (string, error) {
	if p == "" {
		return "", badRequest("%s.host.path is required", field)
	}
	if !strings.HasPrefix(p, "/") {
		return "", badRequest("%s.host.path %q must be an absolute path", field, p)
	}
	notAllowed := apierror.BadRequest(apierror.CodeHostPathNotAllowed,
		"%s.host.path %q is not under a host path this server allows", field, p)
	if len(s.cfg.AllowedHostPaths) == 0 {
		notAllowed.Message = fmt.Sprintf("%s.host.path %q: this server allows no host volumes", field, p)
		return "", notAllowed
	}
	resolved := resolveExisting(filepath.Clean(p))
	if !s.hostPathAllowed(resolved) {
		return "", notAllowed
	}
	if sub != "" && !s.hostPathAllowed(resolveExisting(filepath.Join(resolved, sub))) {
		return "", apierror.BadRequest(apierror.CodeHostPathNotAllowed,
			"%s.subPath %q leads outside the host paths this server allows", field, sub)
	}
	return resolved, nil
}

// hostPathAllowed reports whether resolved lies under an allowed root.
func (s *Server) hostPathAllowed(resolved string) bool {
	for _, root := range s.cfg.AllowedHostPaths {
		if within(resolved, resolveExisting(root)) {
			return true
		}
	}
	return false
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// the clean absolute path p and appends the rest unchanged.
func resolveExisting(p string) string {
	cur, rest := p, ""
	for {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within reports whether clean absolute path p is root or below it.
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// cleanRoots checks and cleans the configured host path allow-list.
func cleanRoots(roots []string) ([]string, error) {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("server: allowed host path %q is not absolute", r)
		}
		out = append(out, filepath.Clean(r))
	}
	return out, nil
}
