// Package supervisor lets execd be a container's entrypoint: started as
// "execd [flags] -- <user entrypoint...>", the process becomes a small init
// that runs two children, the execd API server (this same binary, re-executed
// with ServerMarkerEnv set) and the user's entrypoint, and exits with the
// entrypoint's status.
//
// While they run it forwards signals to the entrypoint's process group,
// restarts the server with exponential backoff whenever it dies, and reaps
// every process reparented to it, both as PID 1 of a PID namespace and, via
// PR_SET_CHILD_SUBREAPER, when it is not PID 1. SIGTERM, SIGINT or a
// cancelled context stop the entrypoint first, then the server, each with a
// grace period before SIGKILL.
//
// Typical use in execd's main:
//
//	flags, entrypoint := supervisor.SplitArgs(os.Args[1:])
//	if len(entrypoint) == 0 || supervisor.IsSupervisedServer() {
//		serve(flags) // no supervision: just run the API server
//		return
//	}
//	code, err := supervisor.Run(ctx, supervisor.Config{
//		Entrypoint: entrypoint,
//		ServerArgs: flags,
//	})
//	if err != nil {
//		slog.Error("supervisor", "err", err)
//	}
//	os.Exit(code)
//
// The supervising process reaps with wait4(-1), which would steal the exit
// status of any child started some other way: while Run is active the process
// must not start children through os/exec or os.StartProcess. The package
// depends on the standard library and golang.org/x/sys/unix only and must not
// import other execd packages, so the init process stays small.
package supervisor
