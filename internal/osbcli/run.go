package osbcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run executes osb with args (without the program name) and returns the
// process exit code: 0 on success, 1 when an operation failed, 2 on a
// usage error, or the remote exit code for `command run` and `shell`.
// SIGINT and SIGTERM cancel the context every request runs under.
func Run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	home, _ := os.UserHomeDir()
	return run(ctx, args, stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.LookupEnv, home)
}

// stdio are the streams a run reads and writes.
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

func run(ctx context.Context, args []string, io stdio, env func(string) (string, bool), home string) int {
	a := &app{io: io, env: env, home: home}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(io.in)
	root.SetOut(io.out)
	root.SetErr(io.err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ec exitCodeError
	if errors.As(err, &ec) {
		return int(ec)
	}
	if !a.started {
		// cobra failed before any command ran: a flag, argument or
		// command name it could not make sense of.
		err = usageError{err}
	}
	msg, hint, code := a.describe(err)
	fmt.Fprintf(io.err, "osb: %s\n", msg)
	if hint != "" {
		fmt.Fprintf(io.err, "hint: %s\n", hint)
	}
	return code
}
