// Command server-bench measures the lifecycle server's create → first
// command latency through the whole API path (create a sandbox, ask for
// the execd endpoint, run `echo hi` through it) against the bare Docker CLI
// doing the same with the same image (`docker run -d` then `docker exec`),
// measured in the same run, and prints p50/p95 and their ratio.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/bench/internal/benchkit"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func main() {
	serverBin := flag.String("server", "bin/opensandbox-server", "server binary")
	execdBin := flag.String("execd", "bin/execd", "execd binary")
	image := flag.String("image", "opensandbox/base:latest", "sandbox image (must exist locally)")
	n := flag.Int("n", 20, "sandboxes per side")
	flag.StringVar(&dockerNetwork, "docker-network", "", "network of the bare docker run side (default: the engine's default bridge)")
	flag.Parse()
	if err := run(*serverBin, *execdBin, *image, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const key = "bench-key"

var dockerNetwork string

func run(serverBin, execdBin, image string, n int) error {
	addr, stop, err := benchkit.StartServer(serverBin, execdBin, key)
	if err != nil {
		return err
	}
	defer stop()
	base := "http://" + addr

	// Warm both paths once (image layers, page cache).
	if _, _, err := apiRound(base, image); err != nil {
		return err
	}
	if _, _, err := dockerRound(image); err != nil {
		return err
	}
	var ours, bare []time.Duration
	var oursBD, bareBD []breakdown
	for range n {
		// The server replaces a warm network holder after each create;
		// both sides are timed on a quiet engine, after it has.
		if err := waitWarmNetworks(); err != nil {
			return err
		}
		d, bd, err := apiRound(base, image)
		if err != nil {
			return err
		}
		ours, oursBD = append(ours, d), append(oursBD, bd)
		if err := waitWarmNetworks(); err != nil {
			return err
		}
		d, bd, err = dockerRound(image)
		if err != nil {
			return err
		}
		bare, bareBD = append(bare, d), append(bareBD, bd)
	}
	printBreakdown("API", oursBD)
	printBreakdown("docker CLI", bareBD)
	p := benchkit.Percentile
	o50, o95, b50, b95 := p(ours, 50), p(ours, 95), p(bare, 50), p(bare, 95)
	verdict := "met"
	if float64(o50)/float64(b50) > 0.8 {
		verdict = "MISSED"
	}
	fmt.Printf("create -> first command (%s, n=%d): API p50 %v p95 %v | docker run -d + docker exec p50 %v p95 %v | ratio p50 %.2f p95 %.2f | target <= 0.8: %s\n",
		image, n, o50.Round(time.Millisecond), o95.Round(time.Millisecond), b50.Round(time.Millisecond), b95.Round(time.Millisecond),
		float64(o50)/float64(b50), float64(o95)/float64(b95), verdict)
	return nil
}

// call sends one API request with the bench's key.
func call(method, url string, in, out any) (http.Header, error) {
	return benchkit.Call(method, url, key, in, out)
}

// apiRound: create, endpoint, first command; then delete (not timed).
// It returns the whole time and where it went: the client's view of each
// call and the server's steps of the create (its Server-Timing header).
func apiRound(base, image string) (time.Duration, breakdown, error) {
	bd := breakdown{}
	t0 := time.Now()
	var created sandbox.CreateSandboxResponse
	hdr, err := call("POST", base+"/v1/sandboxes", sandbox.CreateSandboxRequest{
		Image: &sandbox.ImageSpec{URI: image}, Entrypoint: []string{"tail", "-f", "/dev/null"},
		ResourceLimits: map[string]string{"cpu": "1", "memory": "256Mi"},
	}, &created)
	if err != nil {
		return 0, nil, err
	}
	t1 := time.Now()
	bd.add("POST /v1/sandboxes (client)", t1.Sub(t0))
	if err := bd.addServerTiming(hdr.Get("Server-Timing")); err != nil {
		return 0, nil, err
	}
	defer call("DELETE", base+"/v1/sandboxes/"+created.ID, nil, nil)
	var ep sandbox.Endpoint
	if _, err := call("GET", base+"/v1/sandboxes/"+created.ID+"/endpoints/44772", nil, &ep); err != nil {
		return 0, nil, err
	}
	t2 := time.Now()
	bd.add("GET endpoint (client)", t2.Sub(t1))
	got, err := benchkit.EchoHi(ep)
	if err != nil {
		return 0, nil, err
	}
	d := time.Since(t0)
	if got != "hi" {
		return 0, nil, fmt.Errorf("first command printed %q", got)
	}
	bd.add("POST /command echo hi (client)", time.Since(t2))
	return d, bd, nil
}

// dockerRound: the same with the bare CLI; the container is removed after.
func dockerRound(image string) (time.Duration, breakdown, error) {
	bd := breakdown{}
	t0 := time.Now()
	args := []string{"run", "-d", "--cpus", "1", "--memory", "256m"}
	if dockerNetwork != "" {
		args = append(args, "--network", dockerNetwork)
	}
	out, err := exec.Command("docker", append(args, image, "tail", "-f", "/dev/null")...).Output()
	if err != nil {
		return 0, nil, fmt.Errorf("docker run: %w", err)
	}
	t1 := time.Now()
	bd.add("docker run -d", t1.Sub(t0))
	id := strings.TrimSpace(string(out))
	defer exec.Command("docker", "rm", "-f", id).Run()
	out, err = exec.Command("docker", "exec", id, "echo", "hi").Output()
	d := time.Since(t0)
	if err != nil || strings.TrimSpace(string(out)) != "hi" {
		return 0, nil, fmt.Errorf("docker exec: %q %v", out, err)
	}
	bd.add("docker exec echo hi", time.Since(t1))
	return d, bd, nil
}

// warmNetworks is the server's default docker.warm_networks.
const warmNetworks = 2

// waitWarmNetworks waits until the server has its warm network holders
// running again (see docs/server.md), so that neither side is timed while
// the engine starts one.
func waitWarmNetworks() error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label=opensandbox.io/netns-holder=true",
			"--filter", "name=sandbox-netns-idle-", "--filter", "status=running").Output()
		if err != nil {
			return fmt.Errorf("docker ps: %w", err)
		}
		if len(strings.Fields(string(out))) >= warmNetworks {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server did not start its %d warm network holders within a minute", warmNetworks)
		}
		time.Sleep(50 * time.Millisecond) // polling the engine, bounded by the deadline
	}
}
