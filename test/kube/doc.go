// Package kube holds end-to-end tests of the single-node test cluster that
// scripts/kube/up.sh brings up (docs/kubernetes.md, "The test cluster"): real
// pods of our images run on its kubelet and containerd, are reachable from
// the host, answer exec and logs, and pull from the local registry. They run
// under `make kube-e2e` (OSB_KUBE_E2E=1, after `make cluster`) and are
// skipped by a plain `go test ./...`.
package kube
