// Package isolation implements execd's Isolated Execution API
// (/v1/isolated/..., upstream OSEP-0013): sessions whose processes run in
// their own user, mount, pid, ipc, uts, cgroup and (unless share_net)
// network namespaces, on a root filesystem built from read-only system
// directories, the session's workspace (rw, ro or a throw-away overlay) and
// explicit binds, with no_new_privs and a reduced capability set.
//
// The namespaces are set up natively, without bubblewrap: execd re-executes
// itself as the session's init (pid 1 of the new pid namespace), which
// builds the root, pivots into it, drops privileges and starts execd's own
// command runner and files handler inside the session on a socket execd
// proxies to. Nothing has to be installed in the image.
//
// Inside a Docker sandbox this needs the opt-in the Docker runtime grants
// (see Bootstrap and docs/isolation.md). The package must not import the
// other runners' packages except command, files and procenv, which the
// in-session server reuses.
package isolation
