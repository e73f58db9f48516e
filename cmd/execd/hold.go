package main

import (
	"os"
	"os/signal"
	"syscall"
)

// holdArg, as execd's only argument, makes it the process of a network
// holder: a container the Docker driver starts ahead of creates so that a
// sandbox can join a network namespace that is already set up (see
// internal/runtime/docker/netns.go). It serves nothing and runs nothing;
// it waits for SIGTERM or SIGINT and exits 0.
const holdArg = "hold"

// hold blocks until the container is stopped. As PID 1 of a container no
// one execs into, it has no children to reap.
func hold() int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return 0
}
