package mcpserver

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeHTTPCutsASlowBody: a client that trickles its POST body to the
// streamable HTTP endpoint (a byte every 500 ms) gets a 4xx (the go-sdk
// answers a body it could not read with 400) and its connection closed
// once httpmw.DefaultBodyLimits' allowance (about 15 s here) is used up,
// instead of holding the connection for the 8 minutes its body would take.
func TestServeHTTPCutsASlowBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeHTTP(ctx, ln, mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil), nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	})

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	io.WriteString(c, "POST "+HTTPPath+" HTTP/1.1\r\nHost: "+ln.Addr().String()+"\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n")
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	for range 1000 {
		select {
		case reply := <-got:
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(reply)), nil)
			if err != nil {
				t.Fatalf("reply %q: %v", reply, err)
			}
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode > 499 {
				t.Fatalf("reply to a trickled body = %q, want a 4xx", reply)
			}
			return
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := io.WriteString(c, " "); err != nil {
			break
		}
	}
	t.Fatalf("the MCP server held a trickled body for 60 s: %q", <-got)
}
