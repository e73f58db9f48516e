// Command egress-bench measures the credential-injecting TLS proxy: HTTPS
// requests (keep-alive, C at a time) to a loopback origin through the proxy
// with a bearer credential injected, against the same requests sent directly
// to the origin in the same run. Direct and proxied rounds alternate and the
// medians are printed: requests/s, p50 latency, the process's CPU time per
// request and the ratios, for three response sizes.
//
// The target (>= 0.8 of direct throughput, p50 overhead <= 2 ms) is judged
// on the 1 KiB response: the size of a typical API answer, which is what
// credentials are injected for. Client, proxy and origin share this
// machine's CPUs, so when the run is CPU-bound the throughput ratio cannot
// exceed direct CPU/request ÷ proxied CPU/request, printed as the ceiling:
// the proxy is a TLS server and a TLS client for every request, about the
// work of the client and the origin together.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
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

func main() {
	n := flag.Int("n", 4000, "requests per side per round (a quarter for 64 KiB)")
	c := flag.Int("c", 8, "concurrent clients")
	rounds := flag.Int("rounds", 5, "alternating direct/proxied rounds; medians are printed")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the first proxied 1 KiB round to this file")
	flag.Parse()
	if err := run(*n, *c, *rounds, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "egress-bench:", err)
		os.Exit(1)
	}
}

const secret = "bench-secret-token"

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
	cpu  time.Duration // process CPU (user+system) per request
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
		if r.Header.Get("X-Bench-Direct") == "" && r.Header.Get("Authorization") != "Bearer "+secret {
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
	port := origin.Listener.Addr().(*net.TCPAddr).Port

	store := vault.NewStore()
	if _, err := store.Create(vault.CreateRequest{
		Credentials: []vault.Credential{{Name: "tok", Source: vault.CredentialSource{Type: vault.SourceInline, Value: secret}}},
		Bindings: []vault.CredentialBinding{{Name: "api", Match: vault.RequestMatch{Hosts: []string{"api.bench.test"}, Ports: []int{port}},
			Auth: vault.Auth{Type: vault.AuthBearer, Credential: "tok"}}},
	}); err != nil {
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
	go p.Serve(ctx, ln)

	// Both clients are alike: keep-alive, up to c idle connections, one
	// address dialled whatever the URL says.
	client := func(roots *x509.Certificate, addr string) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(roots)
		return &http.Client{Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			MaxIdleConnsPerHost: c,
			DisableCompression:  true,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}}
	}
	direct := client(originCA.Certificate(), origin.Listener.Addr().String())
	proxied := client(proxyCA.Certificate(), ln.Addr().String())
	base := "https://api.bench.test:" + strconv.Itoa(port) + "/b/"

	fmt.Printf("egress-bench: loopback HTTPS origin, HTTP/1.1 keep-alive both ways, concurrency %d, GOMAXPROCS %d, %d alternating rounds (medians)\n",
		c, runtime.GOMAXPROCS(0), rounds)
	fmt.Printf("%-8s %12s %10s %12s %10s %7s %11s %9s %9s %8s\n",
		"response", "direct req/s", "p50", "proxy req/s", "p50", "ratio", "p50 added", "CPU/req d", "CPU/req p", "ceiling")
	var verdict string
	for _, w := range workloads {
		url := base + strconv.Itoa(w.size)
		per := max(n/w.nDiv, c)
		// Warm both paths: handshakes, pools, leaf certificate.
		for _, cl := range []*http.Client{direct, proxied} {
			if _, err := measure(ctx, cl, url, c*4, c, cl == direct); err != nil {
				return err
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
						return err
					}
					defer stop()
				}
				cl := map[bool]*http.Client{true: direct, false: proxied}[isDirect]
				r, err := measure(ctx, cl, url, per, c, isDirect)
				if err != nil {
					return fmt.Errorf("%s, direct=%v: %w", w.name, isDirect, err)
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
		fmt.Printf("%-8s %12.0f %10v %12.0f %10v %7.2f %11v %9v %9v %8.2f%s\n",
			w.name, d.rate, d.p50.Round(time.Microsecond), pr.rate, pr.p50.Round(time.Microsecond), ratio,
			added.Round(time.Microsecond), d.cpu.Round(100*time.Nanosecond), pr.cpu.Round(100*time.Nanosecond),
			float64(d.cpu)/float64(pr.cpu), mark)
	}
	fmt.Println("* target (>= 0.8 of direct throughput, p50 overhead <= 2 ms) is judged on the 1 KiB response:", verdict)
	fmt.Println("  ceiling = CPU/req direct ÷ CPU/req proxied: the most a CPU-bound run can reach while client, proxy and origin share these CPUs")
	return nil
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
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measure(ctx context.Context, cl *http.Client, url string, n, c int, direct bool) (result, error) {
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
	slices.Sort(lat)
	return result{rate: float64(n) / elapsed.Seconds(), p50: lat[n/2], cpu: cpu / time.Duration(n)}, nil
}
