package command

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/execd/proc"
	"github.com/opensandbox-go/opensandbox/internal/execd/procenv"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

var errClosed = errors.New("execd is shutting down")

// prepare builds the process for req. Errors are start failures: the
// caller reports them on the stream, after init, as upstream execd does.
func (m *Manager) prepare(req *sandbox.RunCommandRequest) (*exec.Cmd, error) {
	id, err := proc.LookupIdentity(req.UID, req.GID)
	if err != nil {
		return nil, err
	}
	extra := make(map[string]string, len(id.Env)+len(req.Envs))
	for k, v := range id.Env {
		extra[k] = v
	}
	for k, v := range req.Envs {
		extra[k] = v
	}
	env, err := m.opts.Env.Environ(extra)
	if err != nil {
		return nil, err
	}
	dir, err := procenv.ResolveDir(req.Cwd, env)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(procenv.Shell(), "-c", req.Command)
	cmd.Env = env
	cmd.Dir = dir
	// A session of its own: its id is how every process of the command is
	// found again when it must be killed, even in groups it moved to
	// (see proc.KillTree).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: id.Credential}
	return cmd, nil
}

// startProcess starts cmd and returns the Command tracking it. Output files
// must already be attached to cmd.
func (m *Manager) startProcess(cmd *exec.Cmd, req *sandbox.RunCommandRequest, cmdID, logPath string) (*Command, error) {
	c := &Command{
		ID:         cmdID,
		Content:    req.Command,
		Background: req.Background,
		logPath:    logPath,
		done:       make(chan struct{}),
		killGrace:  m.opts.KillGrace,
		logger:     m.log,
		wg:         &m.wg,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start command: %w", err)
	}
	if err := proc.SetUserOOMScoreAdj(cmd.Process.Pid); err != nil {
		m.log.Warn("the command stays at execd's OOM score", "id", cmdID, "err", err)
	}
	c.StartedAt = time.Now()
	c.pgid = cmd.Process.Pid
	return c, nil
}

// openLog creates the output log of a command.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create command log: %w", err)
	}
	return f, nil
}
