package osbcli

import (
	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) sandboxResumeCommand() *cobra.Command {
	var (
		skipHealth bool
		timeout    string
	)
	cmd := &cobra.Command{
		Use:     "resume <sandbox-id>",
		Short:   "Resume a paused sandbox and wait until it answers",
		Example: `  osb sandbox resume 3f2c9a1e-... --resume-timeout 1m`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().BoolVar(&skipHealth, "skip-health-check", false, "return once the sandbox runs, without waiting for execd")
	cmd.Flags().StringVar(&timeout, "resume-timeout", "30", "how long to wait until it is ready, seconds or a duration")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		d, err := parseDurationFlag("resume-timeout", timeout)
		if err != nil {
			return view{}, err
		}
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		sp := a.spin("resuming " + args[0])
		_, err = c.Resume(cmd.Context(), args[0], sandbox.ConnectOptions{ReadyTimeout: d, SkipHealthCheck: skipHealth})
		sp.Stop()
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		return actionView(actionResult{ID: args[0], Status: "resumed"}, args[0]), nil
	})
}
