package main

import (
	"flag"

	"github.com/opensandbox-go/opensandbox/internal/controller/snapshot"
)

// addSnapshotFlags registers the flags of SandboxSnapshots and pause/resume
// (docs/kubernetes.md, "Pause, resume and snapshots").
func addSnapshotFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.snapshot.Registry, "snapshot-registry", "", "registry (and path prefix) snapshot images are pushed to; empty disables snapshots and pause")
	fs.StringVar(&o.snapshot.PushSecret, "snapshot-push-secret", "", "dockerconfigjson Secret, in the sandbox's namespace, with credentials to push snapshots")
	fs.StringVar(&o.resumePullSecret, "resume-pull-secret", "", "image pull Secret, in the sandbox's namespace, added to pods resumed from a snapshot")
	fs.StringVar(&o.snapshot.CommitterImage, "image-committer-image", snapshot.DefaultCommitterImage, "image of the commit Job")
	fs.DurationVar(&o.snapshot.CommitJobTimeout, "commit-job-timeout", snapshot.DefaultCommitJobTimeout, "how long one snapshot commit may take")
	fs.BoolVar(&o.snapshot.RegistryInsecure, "snapshot-registry-insecure", false, "push snapshots over plain HTTP")
	fs.StringVar(&o.snapshot.ContainerdSocket, "containerd-socket-path", snapshot.DefaultContainerdSocket, "containerd's socket on the nodes, mounted into the commit Job")
}
