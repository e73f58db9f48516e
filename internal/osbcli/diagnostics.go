package osbcli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (a *app) diagnosticsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "diagnostics",
		Aliases: []string{"diag"},
		Short:   "Scoped diagnostics of a sandbox (the stable diagnostics API)",
	}
	cmd.AddCommand(a.diagnosticCommand("logs", "Logs of a sandbox's main process"),
		a.diagnosticCommand("events", "Runtime events of a sandbox"))
	return cmd
}

// diagnosticContent is the server's DiagnosticContentResponse.
type diagnosticContent struct {
	SandboxID     string   `json:"sandboxId"`
	Kind          string   `json:"kind"`
	Scope         string   `json:"scope"`
	Delivery      string   `json:"delivery"`
	ContentType   string   `json:"contentType,omitempty"`
	Content       string   `json:"content,omitempty"`
	ContentURL    string   `json:"contentUrl,omitempty"`
	ContentLength int      `json:"contentLength,omitempty"`
	Truncated     bool     `json:"truncated,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
}

func (a *app) diagnosticCommand(kind, short string) *cobra.Command {
	var scope string
	cmd := &cobra.Command{
		Use:   kind + " <sandbox-id>",
		Short: short,
		Long: short + `. The default output is the content itself (or its URL when the
server hands out a link); -o json or yaml show the whole descriptor, -o raw the
server's JSON as is.`,
		Example: "  osb diagnostics " + kind + " 3f2c9a1e-... --scope container",
		Args:    exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVarP(&scope, "scope", "s", "", "what to describe: container or all (required)")
	_ = cmd.MarkFlagRequired("scope")
	return a.result(cmd, formatTable, func(cmd *cobra.Command, args []string) (view, error) {
		c, err := a.sdk()
		if err != nil {
			return view{}, err
		}
		// The SDK wraps only the legacy plain-text form; the scoped form
		// is one GET.
		u := c.BaseURL() + "/sandboxes/" + url.PathEscape(args[0]) + "/diagnostics/" + kind + "?scope=" + url.QueryEscape(scope)
		raw, err := a.getJSON(cmd, u)
		if err != nil {
			return view{}, notFoundHint(fmt.Errorf("diagnostics %s of sandbox %s: %w", kind, args[0], err), args[0])
		}
		var d diagnosticContent
		if err := json.Unmarshal(raw, &d); err != nil {
			return view{}, fmt.Errorf("diagnostics %s of sandbox %s: decode reply: %w", kind, args[0], err)
		}
		return view{data: d, raw: raw, text: func(w io.Writer) error {
			if d.Content == "" && d.ContentURL != "" {
				_, err := fmt.Fprintln(w, d.ContentURL)
				return err
			}
			_, err := io.WriteString(w, d.Content)
			if d.Truncated {
				fmt.Fprintln(a.io.err, "osb: note: the server truncated this content (newest part kept)")
			}
			return err
		}}, nil
	})
}

// getJSON sends an authenticated GET to the lifecycle server and returns
// the body of a 2xx reply; other replies become *sandbox.APIError.
func (a *app) getJSON(cmd *cobra.Command, u string) ([]byte, error) {
	ctx := cmd.Context()
	if a.settings.RequestTimeout > 0 {
		var cancel func()
		ctx, cancel = context.WithTimeout(ctx, a.settings.RequestTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "osb/"+version)
	if a.settings.APIKey != "" {
		req.Header.Set(sandbox.APIKeyHeader, a.settings.APIKey)
	}
	resp, err := a.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, apiErrorFrom(resp, body)
	}
	return body, nil
}

// apiErrorFrom builds the SDK's error type from a failed reply.
func apiErrorFrom(resp *http.Response, body []byte) error {
	e := &sandbox.APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get(sandbox.RequestIDHeader)}
	var er struct {
		Code, Message, Error string
	}
	if json.Unmarshal(body, &er) == nil && (er.Code != "" || er.Message != "" || er.Error != "") {
		e.Code, e.Message = er.Code, er.Message
		if e.Message == "" {
			e.Message = er.Error
		}
	} else {
		e.Message = string(body)
	}
	return e
}
