// Package docker runs sandboxes as containers of a Docker Engine (API 1.41
// or newer) and implements runtime.Runtime.
//
// Every sandbox is one container named "sandbox-<id>". The engine is the
// only record: what Get and List report (metadata, expiry, entrypoint,
// execd token, managed volumes) is kept in container labels under the
// "opensandbox.io/" prefix, so a restarted server loses nothing.
//
// execd reaches any image without rebuilding it: the static binary is
// bind-mounted read-only at /opt/opensandbox/execd (or copied through the
// API when the engine is remote) and becomes the container's entrypoint,
// supervising the user's entrypoint, which stays the container's Cmd.
//
// Usage:
//
//	rt, err := docker.New(ctx, docker.Options{ExecdPath: "/usr/lib/opensandbox/execd"})
//	if err != nil { ... }
//	sb, err := rt.Create(ctx, runtime.Spec{ID: id, Image: "debian:12", Entrypoint: []string{"sleep", "infinity"}, ExecdToken: tok})
//
// The package talks to the engine through its API only; it never runs the
// docker CLI. It must not import the server or the store.
package docker
