// Command pause is the sandbox container of every pod in the test cluster:
// it keeps the pod's namespaces alive and otherwise does nothing. Running as
// PID 1 of a pod that shares its PID namespace, it reaps the orphans that are
// re-parented to it. SIGTERM or SIGINT ends it with status 0; containerd's
// sandbox_image points at the image scripts/kube/up.sh builds around it.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: pause (takes no arguments; SIGTERM or SIGINT ends it)")
		os.Exit(2)
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	reap() // children that exited before the handler was installed
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		os.Exit(0)
	}
}

// reap collects every child that has exited. SIGCHLD signals coalesce, so
// one signal may stand for several exits: wait until none is left.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD (no children) or none exited yet
		}
	}
}
