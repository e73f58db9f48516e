package docker

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

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

	execd, err := r.Address(ctx, spec.ID, 44772)
	if err != nil || execd.Host != "127.0.0.1" || execd.Port <= 0 || execd.Port == 44772 || execd.PathPrefix != "" {
		t.Fatalf("Address(44772) = %+v, %v", execd, err)
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
