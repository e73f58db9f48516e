package osbcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// PTY WebSocket channels (docs/execd.md, "Terminal sessions").
const (
	chanStdin  = 0x00
	chanStdout = 0x01
	chanStderr = 0x02
	chanReplay = 0x03
)

func (a *app) shellCommand() *cobra.Command {
	var cwd, command string
	cmd := &cobra.Command{
		Use:   "shell <sandbox-id>",
		Short: "Open an interactive terminal in a sandbox",
		Long: `Opens a terminal in a sandbox over execd's PTY WebSocket: an interactive bash,
or --command. The local terminal is put in raw mode, window size changes are
forwarded, and osb exits with the remote exit code.

When stdin is not a terminal, osb runs in pipe mode: no raw mode, the remote
side runs on pipes (its stderr kept apart), and at the end of the input osb
sends "exit" to the shell (the protocol has no end-of-input frame). With
--command in pipe mode, osb waits for the command to end by itself.

In pipe mode, -o json and yaml print {sandboxId, exit_code, stdout, stderr}
at the end instead of streaming.`,
		Example: `  osb shell 3f2c9a1e-...
  osb shell 3f2c9a1e-... --cwd /work --command 'htop'
  printf 'cd /tmp; ls\n' | osb shell 3f2c9a1e-...`,
		Args: exactArgs(1, "<sandbox-id>"),
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (~ and $VAR expanded)")
	cmd.Flags().StringVar(&command, "command", "", "run this command line instead of an interactive shell")
	return a.streams(cmd, formatTable, func(cmd *cobra.Command, args []string, format string) error {
		ctx := cmd.Context()
		_, interactive := terminalFd(a.io.in)
		if structured(format) && interactive {
			return usagef("-o %s needs pipe mode (stdin not a terminal): it prints the output as one document at the end", format)
		}
		sb, err := a.connect(ctx, args[0])
		if err != nil {
			return notFoundHint(err, args[0])
		}
		if !structured(format) {
			return a.runShell(ctx, sb, cwd, command, a.io.out, a.io.err)
		}
		var out, errb bytes.Buffer
		err = a.runShell(ctx, sb, cwd, command, &out, &errb)
		var ec exitCodeError
		if err != nil && !errors.As(err, &ec) {
			return err
		}
		data := shellResult{SandboxID: args[0], ExitCode: int(ec), Stdout: out.String(), Stderr: errb.String()}
		if rerr := render(a.io.out, format, view{data: data}); rerr != nil {
			return rerr
		}
		return err
	})
}

// shellResult is a pipe-mode shell as json and yaml print it.
type shellResult struct {
	SandboxID string `json:"sandboxId"`
	ExitCode  int    `json:"exit_code"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
}

// terminalFd returns the descriptor of r when it is a terminal.
func terminalFd(r any) (int, bool) {
	f, ok := r.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return int(f.Fd()), true
}

// runShell runs a terminal session, writing its output to out and errw.
func (a *app) runShell(ctx context.Context, sb *sandbox.Sandbox, cwd, command string, out, errw io.Writer) error {
	inFd, interactive := terminalFd(a.io.in)
	sid, err := a.ptyCreate(ctx, sb, cwd, command)
	if err != nil {
		return fmt.Errorf("open terminal in sandbox %s: %w", sb.ID(), err)
	}
	defer func() {
		// The session would otherwise stay listed; a fresh context so an
		// interrupted shell is cleaned up too.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = a.ptyDelete(dctx, sb, sid)
	}()

	u := strings.Replace(sb.ExecdURL(), "http", "ws", 1) + "/pty/" + url.PathEscape(sid) + "/ws"
	if !interactive {
		u += "?pty=0"
	}
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: sb.ExecdHeaders(), HTTPClient: a.httpClient()})
	if err != nil {
		return fmt.Errorf("attach to terminal %s: %w", sid, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(8 << 20)

	// The first frame says the process runs.
	if _, _, err := readControl(ctx, conn); err != nil {
		return fmt.Errorf("attach to terminal %s: %w", sid, err)
	}

	var writeMu sync.Mutex
	send := func(typ websocket.MessageType, b []byte) error {
		writeMu.Lock()
		defer writeMu.Unlock()
		return conn.Write(ctx, typ, b)
	}
	if interactive {
		old, err := term.MakeRaw(inFd)
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer term.Restore(inFd, old)
		sendSize := func() {
			fd := inFd
			if outFd, ok := terminalFd(a.io.out); ok {
				fd = outFd
			}
			if cols, rows, err := term.GetSize(fd); err == nil && cols > 0 && rows > 0 {
				b, _ := json.Marshal(map[string]any{"type": "resize", "cols": cols, "rows": rows})
				_ = send(websocket.MessageText, b)
			}
		}
		sendSize()
		stop := notifyResize(sendSize)
		defer stop()
	}

	// stdin → binary frames; in pipe mode the end of input ends the shell.
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := a.io.in.Read(buf)
			if n > 0 {
				frame := append([]byte{chanStdin}, buf[:n]...)
				if send(websocket.MessageBinary, frame) != nil {
					return
				}
			}
			if err != nil {
				if !interactive && command == "" {
					_ = send(websocket.MessageBinary, []byte("\x00exit\n"))
				}
				return
			}
		}
	}()

	code, err := pumpOutput(ctx, conn, out, errw)
	if err != nil {
		return fmt.Errorf("terminal %s: %w", sid, err)
	}
	conn.Close(websocket.StatusNormalClosure, "")
	if code != 0 {
		return exitCodeError(code)
	}
	return nil
}

// ptyMessage is a server text frame.
type ptyMessage struct {
	Type     string `json:"type"`
	ExitCode *int   `json:"exit_code"`
	Code     string `json:"code"`
	Error    string `json:"error"`
}

// readControl reads the next frame, which must be a text frame.
func readControl(ctx context.Context, conn *websocket.Conn) (ptyMessage, []byte, error) {
	typ, b, err := conn.Read(ctx)
	if err != nil {
		return ptyMessage{}, nil, err
	}
	var m ptyMessage
	if typ != websocket.MessageText || json.Unmarshal(b, &m) != nil {
		return m, b, fmt.Errorf("unexpected first frame %q", b)
	}
	if m.Type == "error" {
		return m, b, fmt.Errorf("%s: %s", m.Code, m.Error)
	}
	return m, b, nil
}

// pumpOutput copies output frames to stdout/stderr until the exit
// message, and returns the remote exit code.
func pumpOutput(ctx context.Context, conn *websocket.Conn, out, errw io.Writer) (int, error) {
	var remoteErr error
	for {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			if remoteErr != nil {
				return 0, remoteErr
			}
			if websocket.CloseStatus(err) != -1 {
				return 0, fmt.Errorf("closed before the process exited: %w", err)
			}
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, err
		}
		if typ == websocket.MessageBinary {
			if len(b) == 0 {
				continue
			}
			switch b[0] {
			case chanStdout:
				_, err = out.Write(b[1:])
			case chanStderr:
				_, err = errw.Write(b[1:])
			case chanReplay:
				if len(b) > 9 {
					_, err = out.Write(b[9:])
				}
			}
			if err != nil {
				return 0, fmt.Errorf("write output: %w", err)
			}
			continue
		}
		var m ptyMessage
		if err := json.Unmarshal(b, &m); err != nil {
			continue
		}
		switch m.Type {
		case "exit":
			if m.ExitCode == nil {
				return 0, errors.New("exit message without exit_code")
			}
			return *m.ExitCode, nil
		case "error":
			// Non-fatal errors (INVALID_FRAME) carry on; fatal ones are
			// followed by a close, which reports this one.
			remoteErr = fmt.Errorf("%s: %s", m.Code, m.Error)
		}
	}
}

// ptyCreate starts a terminal session (POST /pty) and returns its id.
func (a *app) ptyCreate(ctx context.Context, sb *sandbox.Sandbox, cwd, command string) (string, error) {
	body, _ := json.Marshal(sandbox.CreatePTYRequest{Cwd: cwd, Command: command})
	resp, err := a.execdDo(ctx, sb, http.MethodPost, "/pty", body)
	if err != nil {
		return "", err
	}
	var out sandbox.CreatePTYResponse
	if err := json.Unmarshal(resp, &out); err != nil || out.SessionID == "" {
		return "", fmt.Errorf("unexpected reply to POST /pty: %q", resp)
	}
	return out.SessionID, nil
}

func (a *app) ptyDelete(ctx context.Context, sb *sandbox.Sandbox, sid string) error {
	_, err := a.execdDo(ctx, sb, http.MethodDelete, "/pty/"+url.PathEscape(sid), nil)
	return err
}

// execdDo sends one request to the sandbox's execd and returns the body
// of a 2xx reply.
func (a *app) execdDo(ctx context.Context, sb *sandbox.Sandbox, method, path string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, sb.ExecdURL()+path, r)
	if err != nil {
		return nil, err
	}
	req.Header = sb.ExecdHeaders()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, apiErrorFrom(resp, b)
	}
	return b, nil
}
