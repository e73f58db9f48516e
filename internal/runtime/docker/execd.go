package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const (
	// execdDir and execdInContainer are where execd lives in a sandbox.
	execdDir         = "/opt/opensandbox"
	execdInContainer = execdDir + "/execd"
	execdTokenEnv    = "EXECD_ACCESS_TOKEN"
	execdTokenHeader = "X-EXECD-ACCESS-TOKEN"
)

// execdArchive is the tar stream that puts execd at execdInContainer when
// extracted at "/".
func execdArchive(p string) ([]byte, error) {
	bin, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("docker: read execd: %w: %w", runtime.ErrInvalid, err)
	}
	return optArchive("execd", 0o755, bin)
}

// optArchive is a tar stream, to extract at "/", that puts one file named
// name into /opt/opensandbox (creating the directories).
func optArchive(name string, mode int64, data []byte) ([]byte, error) {
	return fileArchive([]string{"opt/", "opt/opensandbox/"}, "opt/opensandbox/"+name, mode, data)
}

// fileArchive is a tar stream of the directories dirs (mode 0755) and one
// file at path p.
func fileArchive(dirs []string, p string, mode int64, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: now}); err != nil {
			return nil, err
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), ModTime: now}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// freePort picks a TCP port free on ip (host network mode: execd of each
// sandbox listens on its own port). Another process may take it before
// execd binds; Create then fails cleanly and can be retried.
func freePort(ip string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", fmt.Errorf("docker: pick a port for execd on %s: %w", ip, err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
}

// pingExecd makes one GET /ping to execd at a with the token.
func (r *Runtime) pingExecd(ctx context.Context, a runtime.Address, token string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s%s/ping", net.JoinHostPort(a.Host, strconv.Itoa(a.Port)), a.PathPrefix)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set(execdTokenHeader, token)
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("execd /ping answered %s", resp.Status)
	}
	return nil
}

// waitExecd returns once execd answers /ping, and fails when the
// container stops running, StartTimeout passes or ctx ends. With a
// readiness watch it first waits for execd's readiness line (or the end
// of the container's output), so the first ping is normally the only one
// and nothing sleeps; without one (the attach failed), or should that
// ping fail, it probes with a growing delay.
func (r *Runtime) waitExecd(ctx context.Context, id, token string, watch *readyWatch) error {
	wctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	delay := 5 * time.Millisecond
	var last error
	if watch != nil && !watch.wait(wctx) {
		last = errors.New("no readiness line from execd")
	}
	for wctx.Err() == nil {
		c, err := r.inspect(wctx, id)
		if err != nil {
			if wctx.Err() != nil {
				break
			}
			return err
		}
		if c.State == nil || !c.State.Running {
			st := stateOf(c.State)
			// The entrypoint (or execd) failed to start: a start failure,
			// not a bad request.
			return fmt.Errorf("docker: sandbox %s: container stopped before execd was ready (%s)", id, st.Message)
		}
		if err := r.useSidecarPorts(wctx, id, &c); err != nil {
			return err
		}
		a, err := r.addressOf(c, id, sandbox.ExecdPort)
		if err != nil {
			return err
		}
		runtime.PhasesFrom(ctx).Count("execd-pings", 1)
		if last = r.pingExecd(wctx, a, token); last == nil {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-wctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: sandbox %s: waiting for execd: %w", id, err)
	}
	return fmt.Errorf("docker: sandbox %s: execd did not answer within %s (last error: %v): %w",
		id, r.opts.StartTimeout, last, runtime.ErrUnavailable)
}
