#!/usr/bin/env bash
# Generates the deep-copy code of the custom resource types
# (pkg/apis/sandbox/v1alpha1/zz_generated.deepcopy.go) and their CRD
# manifests (deploy/crds/) from the kubebuilder markers, and the
# controller's ClusterRole (deploy/controller/rbac/role.yaml) from the
# +kubebuilder:rbac markers of internal/controller, with a pinned
# controller-gen run from the Go module proxy.
#
#   bash scripts/generate-crds.sh                      # writes into the tree (make generate)
#   bash scripts/generate-crds.sh OBJDIR CRDDIR RBACDIR # writes elsewhere (the staleness test)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# v0.20.x is the controller-tools line built against Kubernetes 0.35, the
# version of our k8s.io modules.
CONTROLLER_GEN_VERSION=v0.20.1

objdir=${1:-pkg/apis/sandbox/v1alpha1}
crddir=${2:-deploy/crds}
rbacdir=${3:-deploy/controller/rbac}
mkdir -p "$objdir" "$crddir" "$rbacdir"

# generateEmbeddedObjectMeta keeps the labels and annotations of pod
# templates (without it the apiserver prunes template.metadata to {}).
go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_GEN_VERSION}" \
	object paths=./pkg/apis/... "output:object:dir=$objdir" \
	crd:generateEmbeddedObjectMeta=true "output:crd:dir=$crddir"

# The role is generated apart: the rbac generator reads the reconcilers'
# packages, which the object generator must not touch.
go run "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_GEN_VERSION}" \
	rbac:roleName=opensandbox-controller paths=./internal/controller/... "output:rbac:dir=$rbacdir"

# The Helm chart carries copies of both (a chart reads only its own files);
# written on an in-tree run only, test/lint checks that they are identical.
if [ $# -eq 0 ]; then
	chart=deploy/helm/opensandbox
	rm -f "$chart"/crds/*.yaml
	cp "$crddir"/*.yaml "$chart/crds/"
	cp "$rbacdir/role.yaml" "$chart/files/controller-clusterrole.yaml"
fi
