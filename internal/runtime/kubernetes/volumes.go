package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// Volumes are PersistentVolumeClaims. A claim Create makes is labelled
// labelCreatedBy=ID; one to delete with the sandbox (deleteOnSandboxTermination)
// also carries labelID, is owned by the BatchSandbox and is listed in the
// annotation annManagedVolumes, which Delete reads.
const (
	labelCreatedBy    = prefix + "created-by-sandbox"
	annManagedVolumes = prefix + "managed-volumes" // comma list of claims
	// DefaultClaimStorage is the size of a claim made without one.
	DefaultClaimStorage = "1Gi"
)

// volumeName is the pod's name for volume i of a sandbox.
func volumeName(i int) string { return "vol-" + strconv.Itoa(i) }

// checkVolumes validates the volumes of spec.
func checkVolumes(spec runtime.Spec) error {
	for _, v := range spec.Volumes {
		switch {
		case v.HostPath != "":
			return fmt.Errorf("kubernetes: sandbox %s: volume %s: host paths are not mounted on a cluster: %w", spec.ID, v.Name, runtime.ErrNotSupported)
		case v.ClaimName == "":
			return fmt.Errorf("kubernetes: sandbox %s: volume %s: no claim: %w", spec.ID, v.Name, runtime.ErrInvalid)
		case v.MountPath == "" || !strings.HasPrefix(v.MountPath, "/"):
			return fmt.Errorf("kubernetes: sandbox %s: volume %s: mount path %q is not absolute: %w", spec.ID, v.Name, v.MountPath, runtime.ErrInvalid)
		}
		if v.Storage != "" {
			if _, err := resource.ParseQuantity(v.Storage); err != nil {
				return fmt.Errorf("kubernetes: sandbox %s: volume %s: storage %q: %v: %w", spec.ID, v.Name, v.Storage, err, runtime.ErrInvalid)
			}
		}
		for _, m := range accessModes(v) {
			switch corev1.PersistentVolumeAccessMode(m) {
			case corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod:
			default:
				return fmt.Errorf("kubernetes: sandbox %s: volume %s: access mode %q: %w", spec.ID, v.Name, m, runtime.ErrInvalid)
			}
		}
	}
	return nil
}

// addVolumes mounts the claims into the pod template's main container:
// one pod volume per claim (the kubelet does not mount two volumes of one
// claim), read-only when every mount of it is, and a mount per volume.
func addVolumes(ps *corev1.PodSpec, c *corev1.Container, vols []runtime.Volume) {
	names := map[string]string{} // claim -> pod volume name
	for _, v := range vols {
		name, ok := names[v.ClaimName]
		if !ok {
			name = volumeName(len(names))
			names[v.ClaimName] = name
			readOnly := !slices.ContainsFunc(vols, func(w runtime.Volume) bool { return w.ClaimName == v.ClaimName && !w.ReadOnly })
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.ClaimName, ReadOnly: readOnly},
			}})
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: v.MountPath, SubPath: v.SubPath, ReadOnly: v.ReadOnly})
	}
}

// claimFor is the claim Create makes for volume v of sandbox id.
func (r *Runtime) claimFor(id string, v runtime.Volume) (*corev1.PersistentVolumeClaim, error) {
	size := v.Storage
	if size == "" {
		size = DefaultClaimStorage
	}
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return nil, fmt.Errorf("volume %s: storage %q: %v: %w", v.Name, size, err, runtime.ErrInvalid)
	}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if len(accessModes(v)) > 0 {
		modes = modes[:0]
		for _, m := range accessModes(v) {
			modes = append(modes, corev1.PersistentVolumeAccessMode(m))
		}
	}
	lbl := map[string]string{labelCreatedBy: id}
	if v.DeleteOnTermination {
		lbl[labelID] = id
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: v.ClaimName, Namespace: r.ns, Labels: lbl},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: modes,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
	if v.StorageClass != "" {
		pvc.Spec.StorageClassName = ptr.To(v.StorageClass)
	}
	return pvc, nil
}

// prepareVolumes makes the missing claims that may be made; it returns
// the claims it made (for a failed create to remove) and those to delete
// with the sandbox. A missing claim that may not be made is ErrNotFound.
func (r *Runtime) prepareVolumes(ctx context.Context, spec runtime.Spec) (created, managed []string, err error) {
	for _, v := range spec.Volumes {
		var pvc corev1.PersistentVolumeClaim
		err := r.api.Get(ctx, r.key(v.ClaimName), &pvc)
		switch {
		case err == nil:
			continue // it exists: used as it is, never deleted by us
		case !apierrors.IsNotFound(err):
			return created, managed, apiErr(err, "kubernetes: sandbox %s: volume %s: claim %s", spec.ID, v.Name, v.ClaimName)
		case !v.CreateIfNotExists:
			return created, managed, classErr(runtime.ErrNotFound, "kubernetes: sandbox %s: volume %s: claim %s does not exist", spec.ID, v.Name, v.ClaimName)
		}
		if slices.Contains(created, v.ClaimName) {
			continue // two mounts of one new claim
		}
		claim, err := r.claimFor(spec.ID, v)
		if err != nil {
			return created, managed, fmt.Errorf("kubernetes: sandbox %s: %w", spec.ID, err)
		}
		if err := r.cached.Create(ctx, claim); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // made meanwhile by another create: used as it is
			}
			return created, managed, apiErr(err, "kubernetes: sandbox %s: volume %s: create claim %s", spec.ID, v.Name, v.ClaimName)
		}
		created = append(created, v.ClaimName)
		if v.DeleteOnTermination {
			managed = append(managed, v.ClaimName)
		}
	}
	return created, managed, nil
}

// managedClaims are the claims to delete with BatchSandbox annotations ann.
func managedClaims(ann map[string]string) []string {
	if ann[annManagedVolumes] == "" {
		return nil
	}
	return strings.Split(ann[annManagedVolumes], ",")
}

// deleteClaims deletes the claims of sandbox id among names (those it made)
// and waits until they are gone.
func (r *Runtime) deleteClaims(ctx context.Context, id string, names []string) error {
	for _, name := range names {
		var pvc corev1.PersistentVolumeClaim
		err := r.api.Get(ctx, r.key(name), &pvc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return apiErr(err, "kubernetes: sandbox %s: claim %s", id, name)
		}
		if pvc.Labels[labelCreatedBy] != id {
			continue // not the one this sandbox made
		}
		if err := r.cached.Delete(ctx, &pvc, preconditionUID(pvc.UID)); err != nil && !apierrors.IsNotFound(err) {
			return apiErr(err, "kubernetes: sandbox %s: delete claim %s", id, name)
		}
	}
	return poll(ctx, func() (bool, error) {
		for _, name := range names {
			var pvc corev1.PersistentVolumeClaim
			err := r.api.Get(ctx, r.key(name), &pvc)
			if err == nil && pvc.Labels[labelCreatedBy] == id {
				return false, nil
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}

// accessModes are the access modes a volume asks for.
func accessModes(v runtime.Volume) []string {
	var out []string
	for _, m := range strings.Split(v.AccessModes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}
