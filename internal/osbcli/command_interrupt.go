package osbcli

import (
	"github.com/spf13/cobra"
)

// commandAction is what an action on a command, session or context in a
// sandbox prints in json and yaml.
type commandAction struct {
	SandboxID string `json:"sandboxId"`
	ID        string `json:"id"`
	Status    string `json:"status"`
}

func (a *app) commandInterruptCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "interrupt <sandbox-id> <command-id>",
		Short:   "Stop a running command",
		Example: `  osb command interrupt 3f2c9a1e-... 1a2b3c [-o json]`,
		Args:    exactArgs(2, "<sandbox-id> <command-id>"),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ctx := cmd.Context()
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return view{}, notFoundHint(err, args[0])
		}
		if err := sb.Interrupt(ctx, args[1]); err != nil {
			return view{}, err
		}
		return actionView(commandAction{SandboxID: args[0], ID: args[1], Status: "interrupted"}, args[1]), nil
	})
}
