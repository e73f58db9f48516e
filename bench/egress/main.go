// Command egress-bench measures the credential-injecting TLS proxy: N HTTPS
// requests (keep-alive, C at a time) to a loopback origin through the proxy
// with a bearer credential injected, against the same requests sent directly
// to the origin in the same run, and prints requests/s, p50 latency and their
// ratios.
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
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/egress/tlsproxy"
	"github.com/opensandbox-go/opensandbox/internal/egress/vault"
)

func main() {
	n := flag.Int("n", 5000, "requests per side")
	c := flag.Int("c", 8, "concurrent clients")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the proxied run to this file")
	flag.Parse()
	profile = *cpuprofile
	if err := run(*n, *c); err != nil {
		fmt.Fprintln(os.Stderr, "egress-bench:", err)
		os.Exit(1)
	}
}

const secret = "bench-secret-token"

var profile string

func run(n, c int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	originCA, err := tlsproxy.NewCA("origin")
	if err != nil {
		return err
	}
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && r.Header.Get("X-Bench-Direct") == "" && r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "missing credential", http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok")
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

	client := func(roots *x509.Certificate, addr string) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(roots)
		return &http.Client{Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool},
			MaxIdleConnsPerHost: c,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}}
	}
	url := "https://api.bench.test:" + strconv.Itoa(port) + "/v1/x"
	direct := client(originCA.Certificate(), origin.Listener.Addr().String())
	proxied := client(proxyCA.Certificate(), ln.Addr().String())

	// Warm both paths (handshakes, pools), then measure alternately.
	for _, cl := range []*http.Client{direct, proxied} {
		if _, _, err := measure(ctx, cl, url, c*4, c, cl == direct); err != nil {
			return err
		}
	}
	dRate, dP50, err := measure(ctx, direct, url, n, c, true)
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
	}
	pRate, pP50, err := measure(ctx, proxied, url, n, c, false)
	pprof.StopCPUProfile()
	if err != nil {
		return fmt.Errorf("proxied: %w", err)
	}
	fmt.Printf("requests: %d per side, concurrency %d, loopback HTTPS keep-alive\n", n, c)
	fmt.Printf("direct : %8.0f req/s  p50 %v\n", dRate, dP50)
	fmt.Printf("proxied: %8.0f req/s  p50 %v  (bearer injected)\n", pRate, pP50)
	fmt.Printf("throughput ratio proxied/direct: %.2f   p50 overhead: %v\n", pRate/dRate, pP50-dP50)
	fmt.Println("target: >= 0.8 of direct throughput, p50 overhead <= 2 ms")
	return nil
}

func measure(ctx context.Context, cl *http.Client, url string, n, c int, direct bool) (float64, time.Duration, error) {
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
	if firstEr != nil {
		return 0, 0, firstEr
	}
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat[n/2], nil
}
