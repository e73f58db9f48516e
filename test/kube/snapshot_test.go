package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
)

// pauseExecdImage is the execd image's plain name on the node (static-images.sh).
const pauseExecdImage = "opensandbox/execd:latest"

// snapshotTimeout bounds a pause or a resume: a commit Job, a push to the
// local registry, a pod made again.
const snapshotTimeout = 5 * time.Minute

// TestOperatorPauseResume pauses a running sandbox and resumes it: a file
// written through execd before the pause is committed by the image
// committer through the node's containerd, pushed to the cluster's
// registry, the pod is released, and the pod made again from the snapshot
// under the same name has the file.
func TestOperatorPauseResume(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	op := c.startSnapshotOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*snapshotTimeout)
	defer cancel()

	bsbx := &sandboxv1alpha1.BatchSandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pausable"},
		Spec: sandboxv1alpha1.BatchSandboxSpec{
			Replicas: ptr(int32(1)),
			Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr(int64(0)),
				InitContainers: []corev1.Container{{
					Name: "execd-installer", Image: pauseExecdImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Args:         []string{"install", "/opt/opensandbox"},
					VolumeMounts: []corev1.VolumeMount{{Name: "opensandbox-bin", MountPath: "/opt/opensandbox"}},
				}},
				Containers: []corev1.Container{{
					Name: "main", Image: baseImage, ImagePullPolicy: corev1.PullIfNotPresent,
					Command:      []string{"/opt/opensandbox/execd", "--port", "44772"},
					VolumeMounts: []corev1.VolumeMount{{Name: "opensandbox-bin", MountPath: "/opt/opensandbox"}},
				}},
				Volumes: []corev1.Volume{{Name: "opensandbox-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			}},
		},
	}
	start := time.Now()
	if err := cl.Create(ctx, bsbx); err != nil {
		t.Fatalf("create BatchSandbox: %v", err)
	}
	ip := waitEndpoint(ctx, t, cl, bsbx)
	t.Logf("running in %s", time.Since(start).Round(time.Millisecond))
	oldPod, err := c.client.CoreV1().Pods(ns).Get(ctx, "pausable-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const path, content = "/root/snapshot-marker.txt", "written before the pause\n"
	execdUpload(ctx, t, ip, path, content)
	if got := execdDownload(ctx, t, ip, path); got != content {
		t.Fatalf("read back %q before the pause", got)
	}

	// Pause: committed, pushed, pod released. The controller is killed
	// once the snapshot exists and started again: it goes on with the same
	// snapshot and Job.
	setPause(ctx, t, cl, bsbx, ptr(true))
	start = time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, snapshotTimeout, true, func(ctx context.Context) (bool, error) {
		var list sandboxv1alpha1.SandboxSnapshotList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return len(list.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("no SandboxSnapshot made for the pause: %v", err)
	}
	op.Kill()
	op.Start()
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, snapshotTimeout, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(bsbx), bsbx); err != nil {
			return false, err
		}
		return bsbx.Status.Phase == sandboxv1alpha1.BatchSandboxPhasePaused || bsbx.Status.Phase == sandboxv1alpha1.BatchSandboxPhaseFailed, nil
	})
	if err != nil || bsbx.Status.Phase != sandboxv1alpha1.BatchSandboxPhasePaused {
		t.Fatalf("not Paused: %v; status %+v; snapshots:\n%s", err, bsbx.Status, c.snapshots(ctx, cl, ns))
	}
	t.Logf("paused in %s", time.Since(start).Round(time.Millisecond))
	var snaps sandboxv1alpha1.SandboxSnapshotList
	if err := cl.List(ctx, &snaps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(snaps.Items) != 1 {
		t.Fatalf("%d snapshots, want 1", len(snaps.Items))
	}
	snap := snaps.Items[0]
	if snap.Status.Phase != sandboxv1alpha1.SandboxSnapshotPhaseSucceed || len(snap.Status.Containers) != 1 ||
		!strings.HasPrefix(snap.Status.Containers[0].ImageURI, c.registry+"/"+ns+"/pausable:") || snap.Status.SourceNodeName != oldPod.Spec.NodeName {
		t.Fatalf("snapshot status %+v", snap.Status)
	}
	img := snap.Status.Containers[0]
	// The image is in the registry under the digest in status.
	repo, tag, _ := strings.Cut(strings.TrimPrefix(img.ImageURI, c.registry+"/"), ":")
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, fmt.Sprintf("http://%s/v2/%s/manifests/%s", c.registry, repo, tag), nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != img.ImageDigest {
		t.Fatalf("registry has %s: %s, digest %q (status says %s)", img.ImageURI, resp.Status, resp.Header.Get("Docker-Content-Digest"), img.ImageDigest)
	}
	// It is the base image (same config, same layers) plus one layer.
	snapCfg, snapLayers := imageConfig(ctx, t, c.registry, repo, tag)
	baseRepo, baseTag, _ := strings.Cut(baseImage, ":")
	baseCfg, baseLayers := imageConfig(ctx, t, c.registry, baseRepo, baseTag)
	if fmt.Sprint(snapCfg.Config.Env, snapCfg.Config.Entrypoint, snapCfg.Config.Cmd, snapCfg.Config.WorkingDir) !=
		fmt.Sprint(baseCfg.Config.Env, baseCfg.Config.Entrypoint, baseCfg.Config.Cmd, baseCfg.Config.WorkingDir) {
		t.Errorf("snapshot config %+v differs from the base's %+v", snapCfg.Config, baseCfg.Config)
	}
	if len(snapLayers) != len(baseLayers)+1 || len(snapCfg.RootFS.DiffIDs) != len(baseCfg.RootFS.DiffIDs)+1 {
		t.Errorf("snapshot has %d layers (%d diff ids), the base %d (%d)", len(snapLayers), len(snapCfg.RootFS.DiffIDs), len(baseLayers), len(baseCfg.RootFS.DiffIDs))
	}
	// By content (diff ids): the registry's copy of the base was pushed
	// from Docker, the node's imported from `docker save`, so their
	// compressed digests differ.
	for i, d := range baseCfg.RootFS.DiffIDs {
		if i < len(snapCfg.RootFS.DiffIDs) && snapCfg.RootFS.DiffIDs[i] != d {
			t.Errorf("layer %d: diff id %s, the base's is %s", i, snapCfg.RootFS.DiffIDs[i], d)
		}
	}
	if _, err := c.client.CoreV1().Pods(ns).Get(ctx, "pausable-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pod is still there while paused (err %v)", err)
	}
	if eps, _ := sandboxv1alpha1.Endpoints(bsbx); len(eps) != 0 {
		t.Fatalf("endpoints while paused: %v", eps)
	}
	jobs, err := c.client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 0 {
		t.Fatalf("commit jobs left behind: %v %v", jobs, err)
	}

	// Resume: the same name, the snapshot's image, the file.
	setPause(ctx, t, cl, bsbx, ptr(false))
	start = time.Now()
	ip = waitEndpoint(ctx, t, cl, bsbx)
	t.Logf("resumed in %s", time.Since(start).Round(time.Millisecond))
	newPod, err := c.client.CoreV1().Pods(ns).Get(ctx, "pausable-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if newPod.UID == oldPod.UID || newPod.Spec.Containers[0].Image != img.ImageURI+"@"+img.ImageDigest {
		t.Fatalf("resumed pod %s (uid %s, was %s) runs %s", newPod.Name, newPod.UID, oldPod.UID, newPod.Spec.Containers[0].Image)
	}
	if got := execdDownload(ctx, t, ip, path); got != content {
		t.Fatalf("after the resume %s holds %q, want %q", path, got, content)
	}
}

func setPause(ctx context.Context, t *testing.T, cl client.Client, bsbx *sandboxv1alpha1.BatchSandbox, pause *bool) {
	t.Helper()
	patch := map[string]any{"spec": map[string]any{"pause": pause}}
	raw, _ := json.Marshal(patch)
	if err := cl.Patch(ctx, bsbx, client.RawPatch("application/merge-patch+json", raw)); err != nil {
		t.Fatalf("setting spec.pause: %v", err)
	}
}

// waitEndpoint waits for bsbx to be ready with one endpoint whose execd
// answers, and returns it.
func waitEndpoint(ctx context.Context, t *testing.T, cl client.Client, bsbx *sandboxv1alpha1.BatchSandbox) string {
	t.Helper()
	var ip string
	err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, snapshotTimeout, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(bsbx), bsbx); err != nil {
			return false, err
		}
		eps, err := sandboxv1alpha1.Endpoints(bsbx)
		if err != nil || len(eps) != 1 || bsbx.Status.Ready != 1 {
			return false, err
		}
		ip = eps[0]
		resp, err := http.Get("http://" + ip + ":44772/ping")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode < 500, nil
	})
	if err != nil {
		t.Fatalf("BatchSandbox %s not ready with an answering execd: %v (status %+v)", bsbx.Name, err, bsbx.Status)
	}
	return ip
}

// execdUpload writes content to path in the sandbox through execd's
// multipart upload.
func execdUpload(ctx context.Context, t *testing.T, ip, path, content string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	part, _ := mw.CreatePart(h)
	fmt.Fprintf(part, `{"path":%q}`, path)
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", multipart.FileContentDisposition("file", "marker"))
	h.Set("Content-Type", "application/octet-stream")
	part, _ = mw.CreatePart(h)
	io.WriteString(part, content)
	mw.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ip+":44772/files/upload", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upload %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upload %s: %s: %s", path, resp.Status, b)
	}
}

// execdDownload reads path in a sandbox through execd's file API on ip.
func execdDownload(ctx context.Context, t *testing.T, ip, path string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":44772/files/download?path="+url.QueryEscape(path), nil)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("download %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// snapshots describes the SandboxSnapshots of ns, for failure messages.
func (c *cluster) snapshots(ctx context.Context, cl client.Client, ns string) string {
	var list sandboxv1alpha1.SandboxSnapshotList
	if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, s := range list.Items {
		fmt.Fprintf(&b, "%s: %+v\n", s.Name, s.Status)
	}
	return b.String()
}

// imageConfig reads image repo:tag's config and layer digests from the
// registry at host (plain HTTP).
func imageConfig(ctx context.Context, t *testing.T, host, repo, tag string) (ocispec.Image, []string) {
	t.Helper()
	get := func(path, accept string, v any) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/"+repo+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("registry GET %s%s: %v", repo, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("registry GET %s%s: %s: %s", repo, path, resp.Status, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("registry GET %s%s: %v", repo, path, err)
		}
	}
	var m ocispec.Manifest
	get("/manifests/"+tag, ocispec.MediaTypeImageManifest+", application/vnd.docker.distribution.manifest.v2+json", &m)
	var cfg ocispec.Image
	get("/blobs/"+m.Config.Digest.String(), "", &cfg)
	var layers []string
	for _, l := range m.Layers {
		layers = append(layers, l.Digest.String())
	}
	return cfg, layers
}
