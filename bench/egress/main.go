// Command egress-bench measures the credential-injecting TLS proxy: HTTPS
// requests (keep-alive, C at a time) to a loopback origin through the proxy
// with a bearer credential injected, against the same requests sent directly
// to the origin in the same run. The shared-cores measurement also prints
// rows for a host without binding, whose connections the proxy splices. Direct and proxied rounds alternate and the
// medians are printed: requests/s, p50 latency, CPU time per request and the
// ratios, for three response sizes, in two measurements:
//
//  1. shared cores: client, proxy and origin in this one process on all of
//     the machine's CPUs. The worst case, sandbox and sidecar competing for
//     the same cores. When the run is CPU-bound the throughput ratio cannot
//     exceed direct CPU/request ÷ proxied CPU/request, printed as the
//     ceiling: the proxy is a TLS server and a TLS client for every request,
//     more work than the client and the origin together, so below 0.5.
//  2. dedicated proxy core: the proxy runs in a child process (this binary
//     re-executed with BENCH_EGRESS_ROLE=proxy) pinned to one CPU with
//     GOMAXPROCS=1, and this process (client and origin) is pinned to
//     another CPU with GOMAXPROCS=1 for the direct and the proxied rounds
//     alike. That models the deployment: the proxy runs in the egress
//     sidecar, a separate process with its own CPU budget, and neither the
//     sandbox's client nor the remote origin shares its CPU. The only
//     difference between direct and proxied is the extra hop through a
//     proxy that has its own core. Skipped, with the reason printed, when
//     fewer than 2 CPUs are usable.
//
// The target (>= 0.8 of direct throughput, p50 overhead <= 2 ms) is judged
// on the 1 KiB response, the size of a typical API answer, which is what
// credentials are injected for, in the dedicated-core measurement. Both
// measurements use the same client settings, response sizes and
// concurrency; the origin does no work beyond writing the response.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/tlsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

// The proxy child's environment: its role, the directory holding the
// origin's CA certificate (it writes its own CA certificate there), the
// origin's port and the CPU to pin itself to.
const (
	roleEnv = "BENCH_EGRESS_ROLE"
	dirEnv  = "BENCH_EGRESS_DIR"
	portEnv = "BENCH_EGRESS_ORIGIN_PORT"
	cpuEnv  = "BENCH_EGRESS_CPU"
)

func main() {
	if os.Getenv(roleEnv) == "proxy" {
		if err := runProxy(); err != nil {
			fmt.Fprintln(os.Stderr, "egress-bench proxy:", err)
			os.Exit(1)
		}
		return
	}
	n := flag.Int("n", 4000, "requests per side per round (a quarter for 64 KiB)")
	c := flag.Int("c", 8, "concurrent clients")
	rounds := flag.Int("rounds", 5, "alternating direct/proxied rounds; medians are printed")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the first proxied 1 KiB round on shared cores (proxy in this process) to this file")
	flag.Parse()
	if err := run(*n, *c, *rounds, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "egress-bench:", err)
		os.Exit(1)
	}
}

const (
	secret    = "bench-secret-token"
	benchHost = "api.bench.test"
	// spliceHost has no binding: its connections pass the proxy spliced.
	spliceHost = "other.bench.test"
)

// workload is one response size.
type workload struct {
	name   string
	size   int
	target bool // the target is judged on this one
	nDiv   int  // requests per round = n / nDiv
}

var workloads = []workload{
	{"2 B", 2, false, 1},
	{"1 KiB", 1 << 10, true, 1},
	{"64 KiB", 64 << 10, false, 4},
}

// result is one measured round.
type result struct {
	rate float64       // requests/s
	p50  time.Duration // latency
	cpu  time.Duration // this process's CPU (user+system) per request
	pcpu time.Duration // the proxy child's CPU per request; 0 when in-process
}

// newInjector is the credential vault both proxies use: one bearer binding
// for the bench host on the origin's port.
func newInjector(port int) (*vault.Store, error) {
	store := vault.NewStore()
	_, err := store.Create(vault.CreateRequest{
		Credentials: []vault.Credential{{Name: "tok", Source: vault.CredentialSource{Type: vault.SourceInline, Value: secret}}},
		Bindings: []vault.CredentialBinding{{Name: "api", Match: vault.RequestMatch{Hosts: []string{benchHost}, Ports: []int{port}},
			Auth: vault.Auth{Type: vault.AuthBearer, Credential: "tok"}}},
	})
	return store, err
}

// newClient is the one client configuration both sides and both
// measurements use: keep-alive, up to c idle connections, one address
// dialled whatever the URL says.
func newClient(root *x509.Certificate, addr string, c int) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: c,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
}

func run(n, c, rounds int, cpuprofile string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	originCA, err := tlsproxy.NewCA("origin")
	if err != nil {
		return err
	}
	bodies := map[string][]byte{}
	for _, w := range workloads {
		bodies["/b/"+strconv.Itoa(w.size)] = []byte(strings.Repeat("x", w.size))
	}
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bound := strings.HasPrefix(r.Host, benchHost+":")
		if bound && r.Header.Get("X-Bench-Direct") == "" && r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "missing credential", http.StatusForbidden)
			return
		}
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
	origin.TLS = &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return originCA.Leaf(h.ServerName) }}
	origin.StartTLS()
	defer origin.Close()
	originAddr := origin.Listener.Addr().String()
	port := origin.Listener.Addr().(*net.TCPAddr).Port
	base := "https://" + benchHost + ":" + strconv.Itoa(port) + "/b/"

	fmt.Printf("egress-bench: loopback HTTPS origin, HTTP/1.1 keep-alive both ways, concurrency %d, %d alternating rounds (medians), %d CPUs\n",
		c, rounds, runtime.NumCPU())

	// 1. Shared cores: the proxy in this process.
	store, err := newInjector(port)
	if err != nil {
		return err
	}
	proxyCA, err := tlsproxy.NewCA("bench")
	if err != nil {
		return err
	}
	p, err := tlsproxy.New(tlsproxy.Config{
		CA: proxyCA, Injector: store,
		OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", port },
		ExtraRoots:  []*x509.Certificate{originCA.Certificate()},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	go p.Serve(pctx, ln)
	fmt.Printf("\n1. shared cores: client, proxy and origin in this process, GOMAXPROCS %d, unpinned\n", runtime.GOMAXPROCS(0))
	direct, proxied := newClient(originCA.Certificate(), originAddr, c), newClient(proxyCA.Certificate(), ln.Addr().String(), c)
	sharedVerdict, err := compare(ctx, base, n, c, rounds, direct, proxied, cpuprofile, nil, "proxy")
	if err != nil {
		return fmt.Errorf("shared cores: %w", err)
	}
	// The same, for a host no binding covers: the proxy splices the TCP
	// stream (the client sees the origin's certificate).
	fmt.Printf("   spliced: %s has no binding, the proxy copies its connections untouched\n", spliceHost)
	spliced := newClient(originCA.Certificate(), ln.Addr().String(), c)
	spliceBase := "https://" + spliceHost + ":" + strconv.Itoa(port) + "/b/"
	if _, err := compare(ctx, spliceBase, n, c, rounds, direct, spliced, "", nil, "splice"); err != nil {
		return fmt.Errorf("shared cores, spliced: %w", err)
	}
	direct.CloseIdleConnections()
	proxied.CloseIdleConnections()
	spliced.CloseIdleConnections()
	pcancel()
	fmt.Println("   ceiling = CPU/req direct ÷ CPU/req proxied: the most a CPU-bound run can reach while client, proxy and origin share these CPUs")

	// 2. Dedicated proxy core: the proxy in a pinned child process.
	fmt.Println("\n2. dedicated proxy core: proxy in a child process on its own CPU; client and origin in this process on another")
	dedicatedVerdict, skipped, err := dedicated(ctx, originCA, originAddr, port, base, n, c, rounds)
	if err != nil {
		return fmt.Errorf("dedicated core: %w", err)
	}
	if skipped != "" {
		fmt.Println("   skipped:", skipped)
	} else {
		fmt.Println("   CPU/req d, p = this process (client + origin); proxy CPU/req = the proxy child")
		fmt.Println("   ceiling = CPU/req direct ÷ the larger of CPU/req proxied and proxy CPU/req: the most a CPU-bound run can reach with one core each")
		fmt.Println("   busy p = share of each core used in the proxied rounds, client + origin / proxy (100% = that core is the bottleneck)")
	}

	fmt.Println()
	fmt.Println("Target: >= 0.8 of direct throughput and p50 overhead <= 2 ms, on the 1 KiB response (*), judged on measurement 2.")
	fmt.Println("  In production the proxy runs in the egress sidecar, a separate process with its own CPU budget, and neither the")
	fmt.Println("  sandbox's client nor the remote origin shares its CPU; measurement 2 models that. Measurement 1 is the worst case,")
	fmt.Println("  sandbox and sidecar competing for the same cores, where the proxy's work (a TLS server and a TLS client per request,")
	fmt.Println("  about as much CPU as client and origin together) caps the ratio at the printed ceiling.")
	if skipped != "" {
		fmt.Println("  dedicated core (judged): not measured,", skipped)
	} else {
		fmt.Println("  dedicated core (judged):", dedicatedVerdict)
	}
	fmt.Println("  shared cores (worst case):", sharedVerdict)
	return nil
}

// dedicated runs the dedicated-core measurement: it starts the proxy child
// pinned to the second usable CPU, pins this process to the first, and
// compares. skipped says why it did not run.
func dedicated(ctx context.Context, originCA *tlsproxy.CA, originAddr string, port int, base string, n, c, rounds int) (verdict, skipped string, err error) {
	cpus, err := usableCPUs()
	if err != nil {
		return "", "cannot read this process's CPU affinity: " + err.Error(), nil
	}
	if len(cpus) < 2 {
		return "", fmt.Sprintf("needs 2 usable CPUs, this process may run on %d", len(cpus)), nil
	}
	here, there := cpus[0], cpus[1]
	dir, err := os.MkdirTemp("", "egress-bench-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "origin-ca.pem"), originCA.CertPEM(), 0o600); err != nil {
		return "", "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "", err
	}
	child, err := startProxy(exe, dir, port, there)
	if err != nil {
		return "", "", err
	}
	defer child.stop()
	proxyCA, err := readCert(filepath.Join(dir, "proxy-ca.pem"))
	if err != nil {
		return "", "", err
	}

	// Direct and proxied rounds alike: client and origin on one CPU.
	if err := pinProcess(os.Getpid(), here); err != nil {
		return "", "", fmt.Errorf("pin this process to CPU %d: %w", here, err)
	}
	runtime.GOMAXPROCS(1)
	fmt.Printf("   client + origin: this process, CPU %d, GOMAXPROCS %d, direct and proxied rounds alike\n", here, runtime.GOMAXPROCS(0))
	fmt.Printf("   proxy: child pid %d, CPU %d, GOMAXPROCS 1\n", child.cmd.Process.Pid, there)

	direct, proxied := newClient(originCA.Certificate(), originAddr, c), newClient(proxyCA, child.addr, c)
	defer direct.CloseIdleConnections()
	defer proxied.CloseIdleConnections()
	verdict, err = compare(ctx, base, n, c, rounds, direct, proxied, "", child.cpu, "proxy")
	if err != nil {
		return "", "", err
	}
	// Threads started during the run inherit their creator's affinity;
	// check that none of either process's escaped.
	for _, chk := range []struct {
		pid, cpu int
	}{{os.Getpid(), here}, {child.cmd.Process.Pid, there}} {
		if err := checkPinned(chk.pid, chk.cpu); err != nil {
			return "", "", err
		}
	}
	return verdict, "", nil
}

// proxyChild is the running proxy child process.
type proxyChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	addr  string
}

// startProxy starts the proxy child and waits for its "ready <addr>" line.
// The child exits when its stdin closes, so it does not outlive this
// process even if this process dies without calling stop.
func startProxy(exe, dir string, port, cpu int) (_ *proxyChild, err error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), roleEnv+"=proxy", dirEnv+"="+dir, portEnv+"="+strconv.Itoa(port),
		cpuEnv+"="+strconv.Itoa(cpu), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start proxy child: %w", err)
	}
	ch := &proxyChild{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	defer func() {
		if err != nil {
			ch.stop()
		}
	}()
	type line struct {
		s   string
		err error
	}
	ready := make(chan line, 1)
	go func() {
		s, err := ch.out.ReadString('\n')
		ready <- line{s, err}
	}()
	select {
	case l := <-ready:
		if l.err != nil {
			return nil, fmt.Errorf("proxy child exited before it was ready: %w", l.err)
		}
		addr, ok := strings.CutPrefix(strings.TrimSpace(l.s), "ready ")
		if !ok {
			return nil, fmt.Errorf("proxy child said %q, want \"ready <addr>\"", l.s)
		}
		ch.addr = addr
		return ch, nil
	case <-time.After(30 * time.Second):
		return nil, errors.New("proxy child not ready within 30s")
	}
}

// cpu asks the child for its CPU time (user+system) so far.
func (ch *proxyChild) cpu() (time.Duration, error) {
	if _, err := io.WriteString(ch.stdin, "cpu\n"); err != nil {
		return 0, fmt.Errorf("ask proxy child for its CPU time: %w", err)
	}
	s, err := ch.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("read proxy child's CPU time: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proxy child's CPU time %q: %w", s, err)
	}
	return time.Duration(ns), nil
}

// stop closes the child's stdin, kills it and reaps it.
func (ch *proxyChild) stop() {
	ch.stdin.Close()
	ch.cmd.Process.Kill()
	ch.cmd.Wait()
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", path)
	}
	return x509.ParseCertificate(block.Bytes)
}

// runProxy is the proxy child: it pins itself, serves the credential proxy
// on a loopback port, writes its CA certificate next to the origin's,
// prints "ready <addr>", then answers "cpu" lines on stdin with its CPU time
// in nanoseconds until stdin closes.
func runProxy() error {
	cpu, err := strconv.Atoi(os.Getenv(cpuEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", cpuEnv, err)
	}
	if err := pinProcess(os.Getpid(), cpu); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	port, err := strconv.Atoi(os.Getenv(portEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", portEnv, err)
	}
	dir := os.Getenv(dirEnv)
	originRoot, err := readCert(filepath.Join(dir, "origin-ca.pem"))
	if err != nil {
		return err
	}
	store, err := newInjector(port)
	if err != nil {
		return err
	}
	ca, err := tlsproxy.NewCA("bench")
	if err != nil {
		return err
	}
	p, err := tlsproxy.New(tlsproxy.Config{
		CA: ca, Injector: store,
		OriginalDst: func(net.Conn) (string, int) { return "127.0.0.1", port },
		ExtraRoots:  []*x509.Certificate{originRoot},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := ca.WriteCertFile(filepath.Join(dir, "proxy-ca.pem")); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Serve(ctx, ln)
	fmt.Printf("ready %s\n", ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() != "cpu" {
			return fmt.Errorf("unknown request %q", sc.Text())
		}
		fmt.Println(int64(cpuTime()))
	}
	return nil // stdin closed: the parent is done or gone
}

// compare runs the alternating rounds for every workload and prints one
// row each; proxyCPU, when set, reads the proxy child's CPU time; label
// names the proxied column. It returns the verdict on the target workload.
func compare(ctx context.Context, base string, n, c, rounds int, direct, proxied *http.Client, cpuprofile string,
	proxyCPU func() (time.Duration, error), label string) (string, error) {
	child := proxyCPU != nil
	if child {
		fmt.Printf("%-8s %12s %10s %12s %10s %7s %11s %9s %9s %9s %8s %9s\n",
			"response", "direct req/s", "p50", label+" req/s", "p50", "ratio", "p50 added", "CPU/req d", "CPU/req p", "proxy CPU", "ceiling", "busy p")
	} else {
		fmt.Printf("%-8s %12s %10s %12s %10s %7s %11s %9s %9s %8s\n",
			"response", "direct req/s", "p50", label+" req/s", "p50", "ratio", "p50 added", "CPU/req d", "CPU/req p", "ceiling")
	}
	var verdict string
	for _, w := range workloads {
		url := base + strconv.Itoa(w.size)
		per := max(n/w.nDiv, c)
		// Warm both paths: handshakes, pools, leaf certificate.
		for _, cl := range []*http.Client{direct, proxied} {
			if _, err := measure(ctx, cl, url, c*4, c, cl == direct, nil); err != nil {
				return "", err
			}
		}
		var ds, ps []result
		for i := range rounds {
			order := []bool{true, false}
			if i%2 == 1 {
				order = []bool{false, true} // alternate who goes first
			}
			for _, isDirect := range order {
				profiling := !isDirect && w.target && i == 0 && cpuprofile != ""
				if profiling {
					stop, err := startProfile(cpuprofile)
					if err != nil {
						return "", err
					}
					defer stop()
				}
				cl, pc := direct, (func() (time.Duration, error))(nil)
				if !isDirect {
					cl, pc = proxied, proxyCPU
				}
				r, err := measure(ctx, cl, url, per, c, isDirect, pc)
				if err != nil {
					return "", fmt.Errorf("%s, direct=%v: %w", w.name, isDirect, err)
				}
				if profiling {
					pprof.StopCPUProfile()
				}
				if isDirect {
					ds = append(ds, r)
				} else {
					ps = append(ps, r)
				}
			}
		}
		d, pr := median(ds), median(ps)
		ratio, added := pr.rate/d.rate, pr.p50-d.p50
		mark := ""
		if w.target {
			mark = " *"
			verdict = fmt.Sprintf("throughput %.2f of direct (%s), p50 overhead %v (%s)",
				ratio, met(ratio >= 0.8), added.Round(time.Microsecond), met(added <= 2*time.Millisecond))
		}
		row := fmt.Sprintf("%-8s %12.0f %10v %12.0f %10v %7.2f %11v %9v %9v",
			w.name, d.rate, d.p50.Round(time.Microsecond), pr.rate, pr.p50.Round(time.Microsecond), ratio,
			added.Round(time.Microsecond), d.cpu.Round(100*time.Nanosecond), pr.cpu.Round(100*time.Nanosecond))
		if child {
			busy := fmt.Sprintf("%.0f/%.0f%%", 100*pr.cpu.Seconds()*pr.rate, 100*pr.pcpu.Seconds()*pr.rate)
			fmt.Printf("%s %9v %8.2f %9s%s\n", row, pr.pcpu.Round(100*time.Nanosecond), float64(d.cpu)/float64(max(pr.cpu, pr.pcpu)), busy, mark)
		} else {
			fmt.Printf("%s %8.2f%s\n", row, float64(d.cpu)/float64(pr.cpu), mark)
		}
	}
	return verdict, nil
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// median takes each field's median on its own.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		rate: pick(func(r result) float64 { return r.rate }),
		p50:  time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		cpu:  time.Duration(pick(func(r result) float64 { return float64(r.cpu) })),
		pcpu: time.Duration(pick(func(r result) float64 { return float64(r.pcpu) })),
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure sends n requests, c at a time; proxyCPU, when set, reads the
// proxy child's CPU time before and after.
func measure(ctx context.Context, cl *http.Client, url string, n, c int, direct bool, proxyCPU func() (time.Duration, error)) (result, error) {
	lat := make([]time.Duration, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		firstEr error
	)
	var pcpu0 time.Duration
	if proxyCPU != nil {
		var err error
		if pcpu0, err = proxyCPU(); err != nil {
			return result{}, err
		}
	}
	cpu0 := cpuTime()
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				if direct {
					req.Header.Set("X-Bench-Direct", "1")
				}
				resp, err := cl.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					firstEr = err
					mu.Unlock()
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	if firstEr != nil {
		return result{}, firstEr
	}
	var pcpu time.Duration
	if proxyCPU != nil {
		pcpu1, err := proxyCPU()
		if err != nil {
			return result{}, err
		}
		pcpu = pcpu1 - pcpu0
	}
	slices.Sort(lat)
	return result{rate: float64(n) / elapsed.Seconds(), p50: lat[n/2], cpu: cpu / time.Duration(n), pcpu: pcpu / time.Duration(n)}, nil
}
