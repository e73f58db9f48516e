// Package rfb is a small client for the Remote Framebuffer protocol (RFB,
// the protocol VNC speaks, RFC 6143), written for tests and benchmarks: it
// connects to a VNC server, authenticates, and fetches full framebuffer
// updates as images, so that a test can prove a desktop sandbox shows
// something and a benchmark can time "create → first VNC frame".
//
// It speaks protocol 3.8 and accepts 3.3 and 3.7 servers; it offers the
// security types None and VNC Authentication, asks for 32-bit true colour
// and the Raw encoding only, and skips the server messages it has no use
// for (SetColourMapEntries, Bell, ServerCutText). It sends no input events.
// Every blocking call takes a context whose deadline and cancellation
// bound the I/O.
//
// The transport is any io.ReadWriteCloser: a TCP connection from [Dial],
// or a WebSocket from [DialWebSocket] (websockify and noVNC's /websockify
// path), or anything else the caller opened:
//
//	conn, err := rfb.DialWebSocket(ctx, "ws://127.0.0.1:6080/websockify", rfb.WebSocketOptions{
//		Header: http.Header{"X-Execd-Access-Token": {token}},
//	})
//	if err != nil { ... }
//	c, err := rfb.NewClient(ctx, conn, rfb.Config{Password: "secret"})
//	if err != nil { ... } // c owns conn now
//	defer c.Close()
//	img, err := c.Frame(ctx)
//	if err != nil { ... }
//	if st := rfb.Stats(img); st.DistinctColors < 2 { ... } // a blank screen
//	err = rfb.SavePNG(filepath.Join(t.ArtifactDir(), "screen.png"), img)
//
// WaitFrame wraps dial, handshake and frame in a retry loop for a server
// that is still starting, which is what timing "create → first VNC frame"
// needs; errors of the security handshake wrap ErrSecurity and end it.
//
// This package imports only the standard library and
// github.com/coder/websocket; it holds no global state.
package rfb
