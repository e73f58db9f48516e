package main

import (
	"io"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/controller/snapshot"
)

func TestSnapshotFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot.Config{CommitterImage: snapshot.DefaultCommitterImage, CommitJobTimeout: snapshot.DefaultCommitJobTimeout,
		ContainerdSocket: snapshot.DefaultContainerdSocket}
	if o.snapshot != want || o.resumePullSecret != "" {
		t.Fatalf("defaults: %+v, resume secret %q", o.snapshot, o.resumePullSecret)
	}
	o, err = parseFlags([]string{"--snapshot-registry", "127.0.0.1:5000", "--snapshot-registry-insecure",
		"--snapshot-push-secret", "push", "--resume-pull-secret", "pull", "--image-committer-image", "c:1",
		"--commit-job-timeout", "90s", "--containerd-socket-path", "/x.sock"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want = snapshot.Config{Registry: "127.0.0.1:5000", RegistryInsecure: true, PushSecret: "push", CommitterImage: "c:1",
		CommitJobTimeout: 90 * time.Second, ContainerdSocket: "/x.sock"}
	if o.snapshot != want || o.resumePullSecret != "pull" {
		t.Fatalf("parsed: %+v, resume secret %q", o.snapshot, o.resumePullSecret)
	}
	if _, err := parseFlags([]string{"--commit-job-timeout", "0s"}, io.Discard); err == nil {
		t.Error("a zero commit timeout was accepted")
	}
}
