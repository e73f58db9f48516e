package server

import (
	"fmt"
	"path"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/grammar"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// execdDir is where the runtime puts execd inside every sandbox; volumes
// must not cover it.
const execdDir = "/opt/opensandbox"

// checkVolumes validates the volumes of a create request and turns them
// into runtime volumes. These are the checks that do not depend on the
// engine; host paths go to the runtime as given, for it to resolve and
// check against its allow-list.
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
			if err := checkHostPath(field, v.Host.Path); err != nil {
				return nil, err
			}
			rv.HostPath = v.Host.Path
		case v.PVC != nil:
			if err := grammar.CheckDNSSubdomain(v.PVC.ClaimName); err != nil {
				return nil, badRequest("%s.pvc.claimName is not a DNS-1123 name: %v", field, err)
			}
			rv.ClaimName = v.PVC.ClaimName
			rv.CreateIfNotExists = v.PVC.CreateIfNotExists == nil || *v.PVC.CreateIfNotExists
			rv.DeleteOnTermination = v.PVC.DeleteOnSandboxTermination
			rv.StorageClass, rv.Storage, rv.AccessModes = v.PVC.StorageClass, v.PVC.Storage, strings.Join(v.PVC.AccessModes, ",")
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

// checkHostPath checks the shape of host path p: present and absolute.
// Whether the engine's host lets sandboxes mount it (the allow-list, after
// resolving symlinks) is the runtime's to decide: it fails the create
// with runtime.ErrHostPathNotAllowed, which becomes HOST_PATH_NOT_ALLOWED.
func checkHostPath(field, p string) error {
	if p == "" {
		return badRequest("%s.host.path is required", field)
	}
	if !strings.HasPrefix(p, "/") {
		return badRequest("%s.host.path %q must be an absolute path", field, p)
	}
	return nil
}

// within reports whether clean absolute path p is root or below it.
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}
