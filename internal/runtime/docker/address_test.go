package docker

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/go-connections/nat"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// background starts a command through execd without waiting for it.
func background(t *testing.T, r *Runtime, id, token, command string) {
	t.Helper()
	a, err := r.Address(testCtx(t), id, 44772)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"command": command, "background": true})
	req, _ := http.NewRequest(http.MethodPost, urlOf(a, "/command"), strings.NewReader(string(body)))
	req.Header.Set(execdTokenHeader, token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatalf("background %q: %v", command, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("background %q: %s", command, resp.Status)
	}
}

func TestAddress(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, nil)
	ctx := testCtx(t)
	spec := baseSpec(t)
	mustCreate(t, r, spec)

	// Upstream's bridge shape: execd's published port under /proxy/44772,
	// which execd serves itself.
	execd, err := r.Address(ctx, spec.ID, 44772)
	if err != nil || execd.Host != "127.0.0.1" || execd.Port <= 0 || execd.Port == 44772 || execd.PathPrefix != "/proxy/44772" {
		t.Fatalf("Address(44772) = %+v, %v; want a published port with /proxy/44772", execd, err)
	}
	if code, _, err := get(execd, "/ping", spec.ExecdToken, 5*time.Second); err != nil || code != 200 {
		t.Errorf("GET /proxy/44772/ping = %d, %v; want 200 from execd", code, err)
	}
	web, err := r.Address(ctx, spec.ID, 8080)
	if err != nil || web.Host != "127.0.0.1" || web.Port <= 0 || web.Port == execd.Port || web.PathPrefix != "" {
		t.Fatalf("Address(8080) = %+v, %v", web, err)
	}
	other, err := r.Address(ctx, spec.ID, 3000)
	if err != nil || other.Port != execd.Port || other.PathPrefix != "/proxy/3000" {
		t.Fatalf("Address(3000) = %+v, %v; want execd's port with /proxy/3000", other, err)
	}
	for _, p := range []int{0, -1, 65536} {
		_, err := r.Address(ctx, spec.ID, p)
		wantClass(t, "Address(port "+itoa(p)+")", err, runtime.ErrInvalid)
	}

	run(t, r, spec.ID, spec.ExecdToken, "mkdir -p /www && echo served-by-httpd > /www/index.html")
	background(t, r, spec.ID, spec.ExecdToken, "httpd -f -p 3000 -h /www")
	background(t, r, spec.ID, spec.ExecdToken, "httpd -f -p 8080 -h /www")
	var body string
	poll(t, "httpd on 3000 through execd's proxy", 10*time.Second, func() bool {
		code, b, err := get(other, "/index.html", spec.ExecdToken, 2*time.Second)
		body = b
		return err == nil && code == 200
	})
	if strings.TrimSpace(body) != "served-by-httpd" {
		t.Errorf("GET through /proxy/3000 = %q", body)
	}
	poll(t, "httpd on 8080 through its published port", 10*time.Second, func() bool {
		code, b, err := get(web, "/index.html", "", 2*time.Second)
		body = b
		return err == nil && code == 200
	})
	if strings.TrimSpace(body) != "served-by-httpd" {
		t.Errorf("GET on the published 8080 = %q", body)
	}
	if err := r.Delete(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	_, err = r.Address(ctx, spec.ID, 44772)
	wantClass(t, "Address after Delete", err, runtime.ErrNotFound)
}

// TestAddressOf: the address rule for each network mode, from inspected
// containers (no engine needed).
func TestAddressOf(t *testing.T) {
	t.Parallel()
	r := &Runtime{opts: Options{HostIP: "127.0.0.1"}}
	published := func(mode container.NetworkMode, ports nat.PortMap) container.InspectResponse {
		return container.InspectResponse{
			ContainerJSONBase: &container.ContainerJSONBase{HostConfig: &container.HostConfig{NetworkMode: mode}},
			Config:            &container.Config{Labels: map[string]string{labelExecdPort: "45001"}},
			NetworkSettings:   &container.NetworkSettings{NetworkSettingsBase: container.NetworkSettingsBase{Ports: ports}},
		}
	}
	bridgePorts := nat.PortMap{
		execdPortKey: {{HostIP: "127.0.0.1", HostPort: "41000"}},
		httpPortKey:  {{HostIP: "127.0.0.1", HostPort: "41080"}},
	}
	sidecarPorts := nat.PortMap{
		execdPortKey:  {{HostIP: "127.0.0.1", HostPort: "42000"}},
		httpPortKey:   {{HostIP: "127.0.0.1", HostPort: "42080"}},
		egressPortKey: {{HostIP: "127.0.0.1", HostPort: "42180"}},
	}
	bridge := published("bridge", bridgePorts)
	network := published("opensandbox", bridgePorts)
	sidecar := published("container:0123abcd", sidecarPorts)
	sidecar.Config.Labels[labelEgressToken] = "egress-token" // a sandbox behind a sidecar has one
	host := published("host", nil)
	tests := []struct {
		name string
		c    container.InspectResponse
		port int
		want runtime.Address
	}{
		{"bridge execd through its own /proxy", bridge, 44772, runtime.Address{Host: "127.0.0.1", Port: 41000, PathPrefix: "/proxy/44772"}},
		{"bridge HTTP port on its own published port", bridge, 8080, runtime.Address{Host: "127.0.0.1", Port: 41080}},
		{"bridge other port through execd", bridge, 3000, runtime.Address{Host: "127.0.0.1", Port: 41000, PathPrefix: "/proxy/3000"}},
		{"bridge 18080 without a sidecar through execd", bridge, 18080, runtime.Address{Host: "127.0.0.1", Port: 41000, PathPrefix: "/proxy/18080"}},
		{"named network execd", network, 44772, runtime.Address{Host: "127.0.0.1", Port: 41000, PathPrefix: "/proxy/44772"}},
		{"sidecar execd through its own /proxy", sidecar, 44772, runtime.Address{Host: "127.0.0.1", Port: 42000, PathPrefix: "/proxy/44772"}},
		{"sidecar HTTP port", sidecar, 8080, runtime.Address{Host: "127.0.0.1", Port: 42080}},
		{"sidecar API on its own port, never through execd", sidecar, 18080, runtime.Address{Host: "127.0.0.1", Port: 42180}},
		{"sidecar other port", sidecar, 5000, runtime.Address{Host: "127.0.0.1", Port: 42000, PathPrefix: "/proxy/5000"}},
		{"host execd on its labelled port", host, 44772, runtime.Address{Host: "127.0.0.1", Port: 45001}},
		{"host other port directly", host, 3000, runtime.Address{Host: "127.0.0.1", Port: 3000}},
	}
	for _, tt := range tests {
		got, err := r.addressOf(tt.c, "sb", tt.port)
		if err != nil || got != tt.want {
			t.Errorf("%s: addressOf(%d) = %+v, %v; want %+v", tt.name, tt.port, got, err, tt.want)
		}
	}
	unpublished := published("bridge", nat.PortMap{httpPortKey: bridgePorts[httpPortKey]})
	if _, err := r.addressOf(unpublished, "sb", 44772); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("addressOf(44772) with execd's port unpublished = %v, want ErrUnavailable", err)
	}
}
