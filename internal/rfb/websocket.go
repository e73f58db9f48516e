package rfb

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/coder/websocket"
)

// WebSocketOptions tunes DialWebSocket. The zero value is usable.
type WebSocketOptions struct {
	// Header is added to the handshake request, e.g. the sandbox's
	// X-EXECD-ACCESS-TOKEN.
	Header http.Header
	// Subprotocols are offered in Sec-WebSocket-Protocol; empty means
	// "binary", which websockify expects.
	Subprotocols []string
	// HTTPClient makes the handshake request; nil means
	// http.DefaultClient.
	HTTPClient *http.Client
}

// DialWebSocket opens a WebSocket to url (ws://, wss://, http:// or
// https://; for websockify and noVNC that is the /websockify path) and
// returns it as a net.Conn that carries the RFB byte stream in binary
// messages, ready for NewClient. ctx bounds the WebSocket handshake only;
// the connection lives until it is closed.
func DialWebSocket(ctx context.Context, url string, opts WebSocketOptions) (net.Conn, error) {
	protos := opts.Subprotocols
	if len(protos) == 0 {
		protos = []string{"binary"}
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		HTTPClient:   opts.HTTPClient,
		HTTPHeader:   opts.Header,
		Subprotocols: protos,
	})
	if err != nil {
		if resp != nil && resp.Body != nil {
			// The library keeps up to 1 KiB of the refusal's body.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return nil, fmt.Errorf("rfb: websocket %s: HTTP %s %q: %w", url, resp.Status, bytes.TrimSpace(body), err)
		}
		return nil, fmt.Errorf("rfb: websocket %s: %w", url, err)
	}
	// NetConn's context bounds the connection's life, not the dial's.
	return websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary), nil
}
