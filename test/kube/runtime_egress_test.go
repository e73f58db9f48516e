package kube

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/internal/runtime/kubernetes"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// TestKubernetesRuntimeEgress runs a sandbox with a deny-by-default network
// policy that allows one listener pod the test made and not another; the
// egress sidecar (opensandbox/egress:latest, make kube-images) enforces
// it. The sandbox's main container holds neither NET_ADMIN nor NET_RAW and
// cannot change the network. Then the sidecar's process is killed on the
// node (this machine) and a prober running in the sandbox shows that
// nothing gets out until the kubelet has restarted the sidecar, which
// re-applies the policy of the last PATCH (kept on its own volume).
func TestKubernetesRuntimeEgress(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*podTimeout)
	defer cancel()

	allowTok, denyTok := "allowed-"+token(t), "denied-"+token(t)
	c.createPod(t, ns, listenerPod("allowed", baseImage, corev1.PullIfNotPresent, allowTok))
	c.createPod(t, ns, listenerPod("denied", baseImage, corev1.PullIfNotPresent, denyTok))
	allowed := c.waitReady(t, ns, "allowed").Status.PodIP
	denied := c.waitReady(t, ns, "denied").Status.PodIP

	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: pauseExecdImage, CreateTimeout: podTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	id := "eg-" + token(t)
	t.Cleanup(func() { removeSandbox(t, cl, ns, id) })
	spec := runtime.Spec{
		ID: id, Image: baseImage, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "tok-" + token(t),
		Egress: &runtime.Egress{
			Policy: []byte(fmt.Sprintf(`{"defaultAction":"deny","egress":[{"action":"allow","target":%q}]}`, allowed)),
			Token:  "egress-" + token(t),
		},
	}
	start := time.Now()
	sb, err := rt.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create with a network policy: %v", err)
	}
	t.Logf("sandbox with the egress sidecar running after %s", time.Since(start).Round(time.Millisecond))
	if sb.EgressToken != spec.Egress.Token {
		t.Errorf("Get's egress token %q, want the spec's", sb.EgressToken)
	}
	a, err := rt.Address(ctx, id, sandbox.ExecdPort)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) (string, bool) { return execdRun(ctx, t, a, spec.ExecdToken, cmd) }
	fetch := func(ip string) string { return fmt.Sprintf("curl -sS -m 3 http://%s:8080/token", ip) }

	// The policy: the allowed listener answers, the other one does not.
	if out, ok := run(fetch(allowed)); !ok || strings.TrimSpace(out) != allowTok {
		t.Fatalf("the allowed listener: %q (ok %v), want %q", out, ok, allowTok)
	}
	if out, ok := run(fetch(denied)); ok || strings.Contains(out, denyTok) {
		t.Fatalf("the denied listener answered: %q (ok %v)", out, ok)
	}

	// The main container cannot change the network: no NET_ADMIN or
	// NET_RAW in the effective set of the shell or of execd (PID 1), and
	// netlink changes are refused.
	for _, p := range []string{"self", "1"} {
		out, ok := run("grep '^CapEff:' /proc/" + p + "/status")
		f := strings.Fields(out)
		if !ok || len(f) != 2 {
			t.Fatalf("CapEff of %s: %q (ok %v)", p, out, ok)
		}
		caps, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil {
			t.Fatalf("CapEff of %s: %q: %v", p, out, err)
		}
		const netAdmin, netRaw = 12, 13
		if caps&(1<<netAdmin) != 0 || caps&(1<<netRaw) != 0 {
			t.Errorf("/proc/%s/status CapEff %s holds NET_ADMIN or NET_RAW", p, f[1])
		}
	}
	for _, cmd := range []string{"ip link add osbtest0 type dummy", "ip route add 203.0.113.0/24 dev lo", "ip link set lo down",
		"if command -v nft; then nft flush ruleset; else false; fi", "if command -v iptables; then iptables -P OUTPUT ACCEPT; else false; fi"} {
		if out, ok := run(cmd + " 2>&1"); ok {
			t.Errorf("%q in the main container succeeded: %q", cmd, out)
		}
	}
	if out, ok := run(fetch(allowed)); !ok || strings.TrimSpace(out) != allowTok {
		t.Fatalf("the allowed listener after the attempts to change the network: %q (ok %v)", out, ok)
	}

	// The sidecar's API at the pod's address: GET and PATCH /policy with
	// the token, refused without.
	ea, err := rt.Address(ctx, id, sandbox.EgressPort)
	if err != nil {
		t.Fatal(err)
	}
	api := func(method, path, tok, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+net.JoinHostPort(ea.Host, strconv.Itoa(ea.Port))+path, strings.NewReader(body))
		if tok != "" {
			req.Header.Set(sandbox.EgressAuthHeader, tok)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	if code, body := api(http.MethodGet, "/policy", spec.Egress.Token, ""); code != http.StatusOK || !strings.Contains(body, allowed) {
		t.Fatalf("GET /policy: %d %q", code, body)
	}
	if code, _ := api(http.MethodGet, "/policy", "", ""); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("GET /policy without the token: %d", code)
	}
	// A rule added now must survive a restart of the sidecar (TEST-NET-1:
	// nothing answers there).
	const extra = "192.0.2.77"
	if code, body := api(http.MethodPatch, "/policy", spec.Egress.Token, fmt.Sprintf(`[{"action":"allow","target":%q}]`, extra)); code != http.StatusOK {
		t.Fatalf("PATCH /policy: %d %q", code, body)
	}

	// The prober: forever, one attempt at each listener, with times.
	probe := fmt.Sprintf(`while :; do s=$(date +%%s%%N); if curl -s -m 1 -o /dev/null http://%s:8080/token; then a=ok; else a=no; fi; `+
		`if curl -s -m 1 -o /dev/null http://%s:8080/token; then d=ok; else d=no; fi; echo "$s $(date +%%s%%N) $a $d" >> /tmp/probe.log; sleep 0.05; done`, allowed, denied)
	if out, ok := run("setsid nohup bash -c '" + probe + "' >/dev/null 2>&1 </dev/null & echo started"); !ok || !strings.Contains(out, "started") {
		t.Fatalf("start the prober: %q (ok %v)", out, ok)
	}
	waitProbe := func(after time.Time) []probeLine {
		t.Helper()
		var lines []probeLine
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			out, ok := execdRunQuiet(pctx, a, spec.ExecdToken, "cat /tmp/probe.log")
			if !ok {
				return false, nil // execd is unreachable while the sidecar is down
			}
			lines = parseProbe(t, out)
			for _, l := range lines {
				if l.start.After(after) && l.allowed {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("no successful probe of the allowed listener after %s: %v; the probes: %v", after.Format(time.RFC3339Nano), err, lines)
		}
		return lines
	}
	waitProbe(time.Now())

	// Kill the sidecar until one restart took long enough for whole
	// probes to run without it (the kubelet restarts a container at once
	// the first time, then backs off).
	inWindow := 0
	for kill := 1; kill <= 4 && inWindow == 0; kill++ {
		old := waitEgressProc(t, ctx, id, 0)
		if err := syscall.Kill(old.pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the egress sidecar (pid %d): %v", old.pid, err)
		}
		killed := time.Now()
		now := waitEgressProc(t, ctx, id, old.pid)
		// The new process started at the earliest here: probes that
		// ended before it ran with no sidecar at all.
		restarted := now.startedAfter
		t.Logf("kill %d: sidecar pid %d killed at %s; pid %d started after %s", kill, old.pid,
			killed.Format(time.RFC3339Nano), now.pid, restarted.Format(time.RFC3339Nano))
		lines := waitProbe(restarted)
		for _, l := range lines {
			if l.denied {
				t.Errorf("the denied listener was reached at %s", l.start.Format(time.RFC3339Nano))
			}
			if l.start.After(killed) && l.end.Before(restarted) {
				inWindow++
				if l.allowed {
					t.Errorf("the allowed listener was reached at %s, with the sidecar dead (killed %s, restarted after %s)",
						l.start.Format(time.RFC3339Nano), killed.Format(time.RFC3339Nano), restarted.Format(time.RFC3339Nano))
				}
			}
		}
		t.Logf("kill %d: %d probes ran while the sidecar was dead", kill, inWindow)
	}
	if inWindow == 0 {
		t.Fatalf("no probe ran while the sidecar was dead (it always came back at once)")
	}
	// Restarted, the sidecar enforces the policy of the last PATCH.
	if code, body := api(http.MethodGet, "/policy", spec.Egress.Token, ""); code != http.StatusOK || !strings.Contains(body, extra) || !strings.Contains(body, allowed) {
		t.Errorf("GET /policy after the restarts: %d %q, want the patched policy", code, body)
	}
	if out, ok := run(fetch(denied)); ok || strings.Contains(out, denyTok) {
		t.Errorf("the denied listener answered after the restarts: %q (ok %v)", out, ok)
	}
	if err := rt.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("Delete left %v", left)
	}
}

type probeLine struct {
	start, end      time.Time
	allowed, denied bool
}

func (l probeLine) String() string {
	return fmt.Sprintf("%s..%s allowed=%v denied=%v", l.start.Format("15:04:05.000"), l.end.Format("15:04:05.000"), l.allowed, l.denied)
}

func parseProbe(t *testing.T, out string) []probeLine {
	var lines []probeLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue // a line being written
		}
		s, err1 := strconv.ParseInt(f[0], 10, 64)
		e, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		lines = append(lines, probeLine{time.Unix(0, s), time.Unix(0, e), f[2] == "ok", f[3] == "ok"})
	}
	return lines
}

// execdRunQuiet is execdRun for a sandbox that may be unreachable: an
// error is a false, not a failed test.
func execdRunQuiet(ctx context.Context, a runtime.Address, token, cmd string) (string, bool) {
	body := fmt.Sprintf(`{"command":%q}`, cmd)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+net.JoinHostPort(a.Host, strconv.Itoa(a.Port))+"/command", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(sandbox.AccessTokenHeader, token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", false
	}
	var out strings.Builder
	done, failed := false, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev sandbox.StreamEvent
		if err := json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &ev); err != nil {
			continue
		}
		switch ev.Type {
		case sandbox.EventStdout:
			out.WriteString(ev.Text + "\n")
		case sandbox.EventError:
			failed = true
		case sandbox.EventExecutionComplete:
			done = true
		}
	}
	return out.String(), done && !failed && sc.Err() == nil
}

// egressProc is an egress sidecar process on the node.
type egressProc struct {
	pid int
	// startedAfter is a time before the process started (the kernel's
	// boot time has whole seconds).
	startedAfter time.Time
}

// waitEgressProc waits for the egress process of sandbox id other than
// pid not (0: any) on this machine, the cluster's node.
func waitEgressProc(t *testing.T, ctx context.Context, id string, not int) egressProc {
	t.Helper()
	var found egressProc
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, podTimeout, true, func(context.Context) (bool, error) {
		for _, p := range egressProcs(id) {
			if p.pid != not {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no egress process of sandbox %s (other than pid %d) on the node: %v", id, not, err)
	}
	return found
}

// egressProcs lists the processes named egress whose environment names
// sandbox id.
func egressProcs(id string) []egressProc {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	want := []byte("\x00OPENSANDBOX_EGRESS_SANDBOX_ID=" + id + "\x00")
	var out []egressProc
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "egress" {
			continue
		}
		env, err := os.ReadFile(d + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), want) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		out = append(out, egressProc{pid: pid, startedAfter: procStart(d)})
	}
	return out
}

// procStart is a lower bound of the start time of the process of /proc
// directory d: boot time (whole seconds, rounded down) plus its start in
// clock ticks (USER_HZ, 100 per second on Linux).
func procStart(d string) time.Time {
	stat, err := os.ReadFile(d + "/stat")
	if err != nil {
		return time.Time{}
	}
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return time.Time{}
	}
	ticks, _ := strconv.ParseInt(f[19], 10, 64)
	s, _ := os.ReadFile("/proc/stat")
	var btime int64
	for _, line := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			btime, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return time.Unix(btime, 0).Add(time.Duration(ticks) * 10 * time.Millisecond)
}

// TestKubernetesRuntimeEgressCA runs a sandbox with the credential proxy:
// the sidecar's CA certificate reaches the main container through a
// read-only volume before execd starts, and execd trusts it in the
// image's bundle.
func TestKubernetesRuntimeEgressCA(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout)
	defer cancel()
	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: pauseExecdImage, CreateTimeout: podTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	id := "eg-" + token(t)
	t.Cleanup(func() { removeSandbox(t, cl, ns, id) })
	spec := runtime.Spec{
		ID: id, Image: baseImage, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "tok-" + token(t),
		Egress: &runtime.Egress{Policy: []byte(`{"defaultAction":"deny"}`), Token: "egress-" + token(t), CredentialProxy: true},
	}
	if _, err := rt.Create(ctx, spec); err != nil {
		t.Fatalf("Create with the credential proxy: %v", err)
	}
	a, err := rt.Address(ctx, id, sandbox.ExecdPort)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) (string, bool) { return execdRun(ctx, t, a, spec.ExecdToken, cmd) }
	ca, ok := run("cat $OPENSANDBOX_EGRESS_CA_FILE")
	if !ok || !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Fatalf("the egress CA in the main container: %q (ok %v)", ca, ok)
	}
	// The bundle holds the certificate's base64 lines.
	body := strings.Split(strings.TrimSpace(ca), "\n")
	if out, ok := run("grep -cF -- '" + body[len(body)/2] + "' /etc/ssl/certs/ca-certificates.crt"); !ok || strings.TrimSpace(out) == "0" {
		t.Errorf("the system bundle does not hold the egress CA: %q (ok %v)", out, ok)
	}
	if out, ok := run("echo x > $(dirname $OPENSANDBOX_EGRESS_CA_FILE)/other 2>&1"); ok {
		t.Errorf("the CA volume is writable from the main container: %q", out)
	}
	if err := rt.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("Delete left %v", left)
	}
}

// TestKubernetesRuntimeEgressPause pauses and resumes a sandbox with a
// network policy: the operator commits the main container only and makes
// the pod again from the template, sidecar included, so the resumed
// sandbox is behind the policy again before anything of it runs.
func TestKubernetesRuntimeEgressPause(t *testing.T) {
	c := connect(t)
	ns := c.namespace(t)
	c.startSnapshotOperator(t, ns)
	cl := c.sandboxClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*podTimeout+2*snapshotTimeout)
	defer cancel()
	allowTok, denyTok := "allowed-"+token(t), "denied-"+token(t)
	c.createPod(t, ns, listenerPod("allowed", baseImage, corev1.PullIfNotPresent, allowTok))
	c.createPod(t, ns, listenerPod("denied", baseImage, corev1.PullIfNotPresent, denyTok))
	allowed := c.waitReady(t, ns, "allowed").Status.PodIP
	denied := c.waitReady(t, ns, "denied").Status.PodIP

	rt, err := kubernetes.New(ctx, kubernetes.Options{RESTConfig: c.config, Namespace: ns, ExecdImage: pauseExecdImage,
		CreateTimeout: podTimeout, SnapshotTimeout: snapshotTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	id := "eg-" + token(t)
	t.Cleanup(func() { removeSandbox(t, cl, ns, id) })
	spec := runtime.Spec{
		ID: id, Image: baseImage, Entrypoint: []string{"sleep", "infinity"}, ExecdToken: "tok-" + token(t),
		Egress: &runtime.Egress{
			Policy: []byte(fmt.Sprintf(`{"defaultAction":"deny","egress":[{"action":"allow","target":%q}]}`, allowed)),
			Token:  "egress-" + token(t),
		},
	}
	if _, err := rt.Create(ctx, spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	check := func(when string) {
		t.Helper()
		a, err := rt.Address(ctx, id, sandbox.ExecdPort)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if out, ok := execdRun(ctx, t, a, spec.ExecdToken, "curl -sS -m 3 http://"+allowed+":8080/token"); !ok || strings.TrimSpace(out) != allowTok {
			t.Errorf("%s: the allowed listener: %q (ok %v)", when, out, ok)
		}
		if out, ok := execdRun(ctx, t, a, spec.ExecdToken, "curl -sS -m 3 http://"+denied+":8080/token"); ok || strings.Contains(out, denyTok) {
			t.Errorf("%s: the denied listener answered: %q", when, out)
		}
		if out, ok := execdRun(ctx, t, a, spec.ExecdToken, "ip link add osbtest0 type dummy 2>&1"); ok {
			t.Errorf("%s: ip link add succeeded in main: %q", when, out)
		}
	}
	check("before pause")
	waitState := func(want string) {
		t.Helper()
		var last runtime.Sandbox
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, snapshotTimeout, true, func(ctx context.Context) (bool, error) {
			sb, err := rt.Get(ctx, id)
			if err != nil {
				return false, nil
			}
			last = sb
			return sb.State == want, nil
		})
		if err != nil {
			t.Fatalf("sandbox not %s: %v; last %s %s %s", want, err, last.State, last.Reason, last.Message)
		}
	}
	if err := rt.Pause(ctx, id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	waitState(sandbox.StatePaused)
	if err := rt.Resume(ctx, id); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	waitState(sandbox.StateRunning)
	// Running means ready; execd answers once the new pod's sidecar has
	// programmed the firewall.
	a, err := rt.Address(ctx, id, sandbox.ExecdPort)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podTimeout, true, func(ctx context.Context) (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, ok := execdRunQuiet(pctx, a, spec.ExecdToken, "true")
		return ok, nil
	})
	if err != nil {
		t.Fatalf("execd after resume: %v", err)
	}
	check("after resume")
	if err := rt.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if left := leftovers(t, c, cl, ns, id); len(left) > 0 {
		t.Errorf("Delete left %v", left)
	}
}
