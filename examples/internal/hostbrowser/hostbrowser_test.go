package hostbrowser

import (
	"bytes"
	"context"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/testenv"
)

// TestScreenshot opens a page that turns ready only after a script runs,
// and checks that the screenshot is taken after that, at the asked size.
func TestScreenshot(t *testing.T) {
	if _, err := FindChromium(); err != nil {
		testenv.Missing(t, "%v (scripts/ensure-deps.sh installs it)", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><body style="margin:0;background:#000">
<script>setTimeout(() => { document.body.style.background = "rgb(255, 0, 0)"; window.done = true }, 300)</script></body>`))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := Screenshot(ctx, srv.URL, Options{Width: 400, Height: 300, Ready: "window.done === true"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 400 || b.Dy() != 300 {
		t.Errorf("screenshot is %v; want 400x300", b)
	}
	if r, g, b, _ := img.At(200, 150).RGBA(); r>>8 != 255 || g>>8 != 0 || b>>8 != 0 {
		t.Errorf("pixel = %d,%d,%d; want red (taken before Ready)", r>>8, g>>8, b>>8)
	}

	_, err = Screenshot(ctx, srv.URL, Options{Ready: "window.never === true", Timeout: time.Second})
	if err == nil {
		t.Fatal("Ready never true: no error")
	}
}
