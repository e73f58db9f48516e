// Package kubernetes runs sandboxes as BatchSandbox resources of the
// OpenSandbox operator (pkg/apis/sandbox/v1alpha1, template mode, one
// replica) and implements runtime.Runtime.
//
// A sandbox with id ID is:
//
//   - the BatchSandbox ID, labelled opensandbox.io/id=ID, with the user's
//     metadata as its other labels and what labels cannot hold (entrypoint,
//     image, snapshot, resources, platform) in opensandbox.io/ annotations;
//     spec.expireTime is the expiry, spec.pause pauses it;
//   - its pod ID-0 (made by the operator from the template): an init
//     container copies execd from the execd image into an emptyDir mounted
//     at /opt/opensandbox, and the main container runs execd, which
//     supervises the user's entrypoint;
//   - the Secret ID holding the execd token (read by the container through
//     secretKeyRef), and for image.auth the dockerconfigjson Secret ID-pull;
//     both are owned by the BatchSandbox, so the cluster's garbage collector
//     removes them with it.
//
// The cluster is the only record: Get and List read the BatchSandboxes,
// pods and Secrets labelled opensandbox.io/id from an informer cache of
// the namespace; writes go to the API server.
//
// Snapshots are SandboxSnapshot resources labelled opensandbox.io/snapshot-id;
// a sandbox created from one runs the image its status lists for the main
// container.
package kubernetes
