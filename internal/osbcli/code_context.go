package osbcli

import (
	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) codeContextCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context",
		Aliases: []string{"ctx"},
		Short:   "Create, list, get and delete interpreter contexts",
	}
	cmd.AddCommand(a.codeContextCreateCommand(), a.codeContextListCommand(), a.codeContextGetCommand(), a.codeContextDeleteCommand())
	return cmd
}

// contextTable prints contexts as rows.
func contextTable(ctxs ...sandbox.CodeContext) func(*tableWriter) {
	return func(t *tableWriter) {
		t.row("ID", "LANGUAGE", "CWD")
		for _, c := range ctxs {
			t.row(c.ID, c.Language, dash(c.Cwd))
		}
	}
}

func (a *app) codeContextCreateCommand() *cobra.Command {
	var language, cwd string
	cmd := &cobra.Command{
		Use:     "create <sandbox-id>",
		Short:   "Start a new context and print its id",
		Example: `  ctx=$(osb code context create 3f2c9a1e-... -l python -w /work)`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&language, "language", "l", "python", "language: python, javascript or bash")
	cmd.Flags().StringVarP(&cwd, "workdir", "w", "", "working directory of the context")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ci, err := a.codeInterpreter(cmd, args[0])
		if err != nil {
			return view{}, err
		}
		cc, err := ci.CreateContext(cmd.Context(), language, cwd)
		if err != nil {
			return view{}, err
		}
		return view{data: cc, table: func(t *tableWriter) { t.row(cc.ID) }}, nil
	})
}

func (a *app) codeContextListCommand() *cobra.Command {
	var language string
	cmd := &cobra.Command{
		Use:     "list <sandbox-id>",
		Aliases: []string{"ls"},
		Short:   "List contexts, of one language or all",
		Example: `  osb code context list 3f2c9a1e-... [-l python] [-o json]`,
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&language, "language", "l", "", "only contexts of this language")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ci, err := a.codeInterpreter(cmd, args[0])
		if err != nil {
			return view{}, err
		}
		ctxs, err := ci.ListContexts(cmd.Context(), language)
		if err != nil {
			return view{}, err
		}
		if ctxs == nil {
			ctxs = []sandbox.CodeContext{}
		}
		return view{data: ctxs, table: contextTable(ctxs...)}, nil
	})
}

func (a *app) codeContextGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <sandbox-id> <context-id>",
		Short:   "Describe a context",
		Example: `  osb code context get 3f2c9a1e-... "$ctx" -o json`,
		Args:    exactArgs(2, "<sandbox-id> <context-id>"),
	}
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		ci, err := a.codeInterpreter(cmd, args[0])
		if err != nil {
			return view{}, err
		}
		cc, err := ci.GetContext(cmd.Context(), args[1])
		if err != nil {
			return view{}, err
		}
		return view{data: cc, table: contextTable(cc)}, nil
	})
}

func (a *app) codeContextDeleteCommand() *cobra.Command {
	var language string
	cmd := &cobra.Command{
		Use:     "delete <sandbox-id> [<context-id>...]",
		Aliases: []string{"rm"},
		Short:   "Delete contexts by id, or every context of --language",
		Example: `  osb code context delete 3f2c9a1e-... "$ctx"
  osb code context delete 3f2c9a1e-... --language python`,
		Args: minArgs(1, "<sandbox-id> [<context-id>...]"),
	}
	cmd.Flags().StringVarP(&language, "language", "l", "", "delete every context of this language")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		if (language == "") == (len(args) == 1) {
			return view{}, usagef("give context ids or --language, not both and not neither")
		}
		ci, err := a.codeInterpreter(cmd, args[0])
		if err != nil {
			return view{}, err
		}
		if language != "" {
			if err := ci.DeleteContexts(cmd.Context(), language); err != nil {
				return view{}, err
			}
			data := map[string]string{"sandboxId": args[0], "language": language, "status": "deleted"}
			return view{data: data, table: func(*tableWriter) {}}, nil
		}
		deleted := []commandAction{}
		v := view{data: &deleted, table: func(t *tableWriter) {
			for _, d := range deleted {
				t.row(d.ID)
			}
		}}
		for _, id := range args[1:] {
			if err := ci.DeleteContext(cmd.Context(), id); err != nil {
				return v, err
			}
			deleted = append(deleted, commandAction{SandboxID: args[0], ID: id, Status: "deleted"})
		}
		return v, nil
	})
}
