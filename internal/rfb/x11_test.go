//go:build linux

package rfb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

// The integration test runs the client against a real VNC server: x11vnc
// serving an Xvfb display that xsetroot painted with a two-colour grid,
// directly over TCP and through websockify over WebSocket. The colours
// are asymmetric so that swapped channels show. Screenshots and the
// servers' logs go to the test's artifact directory (go test -artifacts).

const (
	x11Width, x11Height = 320, 240
	x11Password         = "s3cr3t!x"
)

var (
	gridFG = color.RGBA{0xff, 0x80, 0x00, 0xff}
	gridBG = color.RGBA{0x20, 0x40, 0x60, 0xff}
)

func needBinaries(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			testenv.Missing(t, "%s is not installed (Debian: apt-get install xvfb x11vnc x11-xserver-utils websockify)", name)
		}
	}
}

// proc is a process a test started in its own process group; cleanup
// stops the group and waits for it.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd.Wait has returned
	err    error         // cmd.Wait's result, once exited is closed
}

// startProc starts cmd (Stdout and Stderr default to a log file in dir)
// and registers its cleanup: SIGTERM to the group, SIGKILL after 5s.
func startProc(t *testing.T, dir, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logf
	} else {
		cmd.Stdout = io.MultiWriter(logf, cmd.Stdout)
	}
	cmd.Stderr = logf
	// Its own group, so that stopping it stops its children too; and
	// SIGTERM should the test binary die before cleanup runs (a go test
	// -timeout panic), so no server outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = 5 * time.Second // should a grandchild keep the output open
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		pgid := cmd.Process.Pid
		syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			t.Logf("%s ignored SIGTERM for 5s; killing it", name)
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.exited
		}
		if t.Failed() {
			logTail(t, logPath)
		}
	})
	return p
}

func logTail(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("read %s: %v", path, err)
		return
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	t.Logf("--- tail of %s:\n%s", path, b)
}

// startXvfb starts Xvfb on a display it picks itself (-displayfd) and
// returns the display name, once Xvfb has said it accepts clients.
func startXvfb(t *testing.T, ctx context.Context, dir string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3",
		"-screen", "0", fmt.Sprintf("%dx%dx24", x11Width, x11Height),
		"-nolisten", "tcp", "-br", // black root until xsetroot paints it
		"-noreset") // keep the background when the last client leaves
	cmd.ExtraFiles = []*os.File{w}
	p := startProc(t, dir, "Xvfb", cmd)
	w.Close()
	if dl, ok := ctx.Deadline(); ok {
		r.SetReadDeadline(dl)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		select {
		case <-p.exited:
			t.Fatalf("Xvfb exited before reporting its display: %v", p.err)
		default:
		}
		t.Fatalf("read Xvfb's display number: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("Xvfb reported display %q: %v", line, err)
	}
	return ":" + strconv.Itoa(n)
}

// firstMatch is an io.Writer that delivers the first submatch of re in
// what is written to it, once.
type firstMatch struct {
	re    *regexp.Regexp
	mu    sync.Mutex
	buf   []byte
	found chan string
}

func (f *firstMatch) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buf == nil {
		return len(p), nil // already found
	}
	f.buf = append(f.buf, p...)
	if m := f.re.FindSubmatch(f.buf); m != nil {
		f.found <- string(m[1])
		f.buf = nil
	}
	return len(p), nil
}

// startX11VNC serves display with x11vnc, password-protected, on a
// loopback port x11vnc picks; it returns the address once x11vnc has
// announced it (x11vnc prints PORT=n when it listens).
func startX11VNC(t *testing.T, ctx context.Context, dir, display string) string {
	t.Helper()
	pwfile := filepath.Join(t.TempDir(), "passwd")
	if out, err := exec.CommandContext(ctx, "x11vnc", "-storepasswd", x11Password, pwfile).CombinedOutput(); err != nil {
		t.Fatalf("x11vnc -storepasswd: %v\n%s", err, out)
	}
	port := &firstMatch{re: regexp.MustCompile(`(?m)^PORT=(\d+)$`), buf: []byte{}, found: make(chan string, 1)}
	cmd := exec.Command("x11vnc", "-display", display, "-rfbauth", pwfile,
		"-localhost", "-rfbportv6", "-1", // IPv6 port probing takes seconds here
		"-forever", "-shared", "-nocursor", "-noshm", "-noxdamage",
		"-repeat") // leaves autorepeat alone; restoring it on exit sometimes hung for seconds
	cmd.Stdout = port
	p := startProc(t, dir, "x11vnc", cmd)
	select {
	case n := <-port.found:
		return net.JoinHostPort("127.0.0.1", n)
	case <-p.exited:
		t.Fatalf("x11vnc exited before listening: %v", p.err)
	case <-ctx.Done():
		t.Fatalf("x11vnc did not report its port: %v", ctx.Err())
	}
	return ""
}

// startWebsockify relays WebSocket connections to target through
// websockify, on a listener this test opened and hands over (inetd
// mode), so there is no port to race for and nothing to wait for: the
// socket is listening before websockify starts.
func startWebsockify(t *testing.T, dir, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("websockify", "--inetd", target)
	cmd.Stdin = f
	startProc(t, dir, "websockify", cmd)
	return ln.Addr().String()
}

// checkGrid checks that img is the xsetroot grid: the desktop's size,
// exactly the two grid colours, each on a good share of the pixels.
func checkGrid(t *testing.T, st FrameStats, colours map[color.RGBA]int) {
	t.Helper()
	if st.Width != x11Width || st.Height != x11Height {
		t.Errorf("frame is %dx%d, want %dx%d", st.Width, st.Height, x11Width, x11Height)
	}
	if st.Uniform() {
		t.Errorf("frame is uniform (%v)", st)
	}
	if st.NonBlackFraction != 1 {
		t.Errorf("frame has black pixels (%v); the grid has none", st)
	}
	if len(colours) != 2 || colours[gridFG] == 0 || colours[gridBG] == 0 {
		t.Errorf("frame colours = %v, want only the grid's %v and %v", colours, gridFG, gridBG)
	}
	for c, n := range colours {
		if frac := float64(n) / float64(st.Width*st.Height); frac < 0.02 {
			t.Errorf("colour %v covers only %.2f%% of the frame", c, 100*frac)
		}
	}
}

func TestX11VNC(t *testing.T) {
	needBinaries(t, "Xvfb", "x11vnc", "xsetroot")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dir := t.ArtifactDir()

	display := startXvfb(t, ctx, dir)
	paint := exec.CommandContext(ctx, "xsetroot", "-display", display, "-mod", "16", "16",
		"-fg", "#ff8000", "-bg", "#204060")
	if out, err := paint.CombinedOutput(); err != nil {
		t.Fatalf("xsetroot: %v\n%s", err, out)
	}
	vncAddr := startX11VNC(t, ctx, dir, display)

	fetch := func(t *testing.T, name string, conn io.ReadWriteCloser) {
		start := time.Now()
		c, err := NewClient(ctx, conn, Config{Password: x11Password})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		defer c.Close()
		handshake := time.Since(start)
		si := c.ServerInit()
		if si.Width != x11Width || si.Height != x11Height {
			t.Errorf("ServerInit says %dx%d, want %dx%d", si.Width, si.Height, x11Width, x11Height)
		}
		if c.ProtocolVersion() != "3.8" || c.SecurityType() != SecurityVNCAuth {
			t.Errorf("agreed on protocol %s with %v, want 3.8 with VNC Authentication", c.ProtocolVersion(), c.SecurityType())
		}
		img, err := c.Frame(ctx)
		if err != nil {
			t.Fatalf("Frame: %v", err)
		}
		total := time.Since(start)
		if err := SavePNG(filepath.Join(dir, name+".png"), img); err != nil {
			t.Error(err)
		}
		st := Stats(img)
		colours := map[color.RGBA]int{}
		for y := range img.Rect.Dy() {
			for x := range img.Rect.Dx() {
				colours[img.RGBAAt(x, y)]++
			}
		}
		checkGrid(t, st, colours)
		t.Logf("desktop %q %v, server format %v; handshake %v, first frame after %v; %v",
			si.Name, img.Rect.Size(), si.PixelFormat, handshake.Round(time.Microsecond), total.Round(time.Microsecond), st)
	}

	t.Run("tcp", func(t *testing.T) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", vncAddr)
		if err != nil {
			t.Fatal(err)
		}
		fetch(t, "tcp", conn)
	})

	t.Run("websockify", func(t *testing.T) {
		needBinaries(t, "websockify")
		wsAddr := startWebsockify(t, dir, vncAddr)
		conn, err := DialWebSocket(ctx, "ws://"+wsAddr+"/websockify", WebSocketOptions{
			// websockify ignores it; our endpoints check it.
			Header: http.Header{"X-Execd-Access-Token": {"unused-here"}},
		})
		if err != nil {
			t.Fatalf("DialWebSocket: %v", err)
		}
		fetch(t, "websockify", conn)
	})

	// Last: x11vnc may slow down a client address after failures.
	t.Run("wrong password", func(t *testing.T) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", vncAddr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewClient(ctx, conn, Config{Password: "not-it"})
		const prefix = "rfb: security: server refused: "
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || len(err.Error()) == len(prefix) {
			t.Fatalf("NewClient with a wrong password: error = %v, want %q and a reason", err, prefix+"…")
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wrong password timed out instead of being refused: %v", err)
		}
		t.Logf("refusal: %v", err)
	})
}
