package osbcli

import (
	"errors"

	"github.com/spf13/cobra"
)

// actionResult is what an action on a sandbox prints in json and yaml:
// the sandbox and what became of it.
type actionResult struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (a *app) sandboxKillCommand() *cobra.Command {
	return a.result(&cobra.Command{
		Use:     "kill <sandbox-id>...",
		Aliases: []string{"rm", "delete"},
		Short:   "Delete sandboxes and everything in them",
		Long: `Deletes sandboxes. Prints each deleted id (-o json: a list of
{"id", "status": "killed"}); ids that fail are reported on stderr and make osb
exit 1 after the others are deleted.`,
		Example: `  osb sandbox kill 3f2c9a1e-... 9b7d0c44-...`,
		Args:    minArgs(1, "<sandbox-id>..."),
	}, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		var errs []error
		killed := []actionResult{}
		for _, id := range args {
			if err := c.Kill(cmd.Context(), id); err != nil {
				errs = append(errs, notFoundHint(err, id))
				continue
			}
			killed = append(killed, actionResult{ID: id, Status: "killed"})
		}
		return view{data: killed, table: func(t *tableWriter) {
			for _, k := range killed {
				t.row(k.ID)
			}
		}}, errors.Join(errs...)
	})
}

// actionView prints one action result: the id alone in a table, so
// scripts reading the old plain output keep working.
func actionView(r any, id string) view {
	return view{data: r, table: func(t *tableWriter) { t.row(id) }}
}
