package pty

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/coder/websocket"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// Channel bytes that open every binary frame.
const (
	chanStdin  byte = 0x00 // client → server
	chanStdout byte = 0x01
	chanStderr byte = 0x02 // pipe mode only
	chanReplay byte = 0x03 // followed by an 8-byte big-endian offset
)

// Codes of error frames ({"type":"error","code":...}).
const (
	codeSessionGone      = "SESSION_GONE"
	codeStartFailed      = "START_FAILED"
	codeStdinWriteFailed = "STDIN_WRITE_FAILED"
	codeInvalidFrame     = "INVALID_FRAME"
	codeAlreadyConnected = apierror.CodeAlreadyConnected
	codeTakenOver        = "TAKEN_OVER"
	codeRuntimeError     = apierror.CodeRuntimeError
)

// statusTakenOver closes the socket of a client replaced by takeover=1.
const statusTakenOver websocket.StatusCode = 4001

// Modes reported in the connected frame.
const (
	modePTY  = "pty"
	modePipe = "pipe"
)

// outFrame is one WebSocket message queued for a client. off is the
// absolute offset of the first output byte of a live or replay frame, and
// -1 for control frames (connected, pong, error, exit).
type outFrame struct {
	typ  websocket.MessageType
	data []byte
	off  int64
}

// closeRequest is the close code and reason a client's socket ends with.
type closeRequest struct {
	code   websocket.StatusCode
	reason string
}

func jsonFrame(v any) outFrame {
	b, err := json.Marshal(v)
	if err != nil {
		// Only fixed structs of strings and ints are marshalled here.
		panic(fmt.Sprintf("pty: marshal server frame: %v", err))
	}
	return outFrame{typ: websocket.MessageText, data: b, off: -1}
}

func connectedFrame(id, mode string) outFrame {
	return jsonFrame(struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
		Mode      string `json:"mode"`
	}{"connected", id, mode})
}

func exitFrame(code int) outFrame {
	return jsonFrame(struct {
		Type     string `json:"type"`
		ExitCode int    `json:"exit_code"`
	}{"exit", code})
}

func errorFrame(code, format string, args ...any) outFrame {
	return jsonFrame(struct {
		Type  string `json:"type"`
		Code  string `json:"code"`
		Error string `json:"error"`
	}{"error", code, fmt.Sprintf(format, args...)})
}

func pongFrame() outFrame {
	return jsonFrame(struct {
		Type string `json:"type"`
	}{"pong"})
}

// outputFrame copies p behind its channel byte.
func outputFrame(ch byte, off int64, p []byte) outFrame {
	b := make([]byte, 1+len(p))
	b[0] = ch
	copy(b[1:], p)
	return outFrame{typ: websocket.MessageBinary, data: b, off: off}
}

// replayFrames splits replayed bytes starting at absolute offset off into
// frames of at most chunk bytes, each carrying its own offset.
func replayFrames(off int64, p []byte, chunk int) []outFrame {
	var frames []outFrame
	for len(p) > 0 {
		n := min(chunk, len(p))
		b := make([]byte, 9+n)
		b[0] = chanReplay
		binary.BigEndian.PutUint64(b[1:9], uint64(off))
		copy(b[9:], p[:n])
		frames = append(frames, outFrame{typ: websocket.MessageBinary, data: b, off: off})
		off += int64(n)
		p = p[n:]
	}
	return frames
}

// clientMessage is any JSON text frame a client may send. Pointers tell a
// missing field from a zero one.
type clientMessage struct {
	Type   string  `json:"type"`
	Data   *string `json:"data"`
	Cols   *int64  `json:"cols"`
	Rows   *int64  `json:"rows"`
	Signal string  `json:"signal"`
}

// Client message types.
const (
	msgStdin  = "stdin"
	msgResize = "resize"
	msgSignal = "signal"
	msgPing   = "ping"
)

var errInvalidFrame = errors.New("invalid frame")

// clientOp is a decoded, validated client frame: what the client asks for.
type clientOp struct {
	kind       string // msgStdin, msgResize, msgSignal or msgPing
	data       []byte // stdin
	rows, cols uint16 // resize
	sig        syscall.Signal
}

// decodeClientFrame decodes one WebSocket message from a client: a binary
// frame is 0x00 followed by stdin bytes, a text frame a JSON clientMessage.
// Every error wraps errInvalidFrame.
func decodeClientFrame(binaryFrame bool, b []byte) (clientOp, error) {
	if binaryFrame {
		if len(b) == 0 || b[0] != chanStdin {
			return clientOp{}, fmt.Errorf("%w: binary frames from the client must start with 0x00 (stdin)", errInvalidFrame)
		}
		return clientOp{kind: msgStdin, data: b[1:]}, nil
	}
	msg, err := parseClientMessage(b)
	if err != nil {
		return clientOp{}, err
	}
	op := clientOp{kind: msg.Type}
	switch msg.Type {
	case msgStdin:
		op.data = []byte(*msg.Data)
	case msgResize:
		op.rows, op.cols = uint16(*msg.Rows), uint16(*msg.Cols)
	case msgSignal:
		op.sig, _ = parseSignal(msg.Signal) // validated by parseClientMessage
	}
	return op, nil
}

// parseClientMessage decodes and validates a text frame.
func parseClientMessage(b []byte) (clientMessage, error) {
	var m clientMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: not a JSON object: %v", errInvalidFrame, err)
	}
	switch m.Type {
	case msgStdin:
		if m.Data == nil {
			return m, fmt.Errorf("%w: stdin frame needs a data string", errInvalidFrame)
		}
	case msgResize:
		if err := checkDimension("cols", m.Cols); err != nil {
			return m, err
		}
		if err := checkDimension("rows", m.Rows); err != nil {
			return m, err
		}
	case msgSignal:
		if _, err := parseSignal(m.Signal); err != nil {
			return m, err
		}
	case msgPing:
	case "":
		return m, fmt.Errorf("%w: missing type", errInvalidFrame)
	default:
		return m, fmt.Errorf("%w: unknown type %q", errInvalidFrame, m.Type)
	}
	return m, nil
}

func checkDimension(name string, v *int64) error {
	if v == nil {
		return fmt.Errorf("%w: resize frame needs %s", errInvalidFrame, name)
	}
	if *v < 1 || *v > 65535 {
		return fmt.Errorf("%w: %s must be between 1 and 65535, got %d", errInvalidFrame, name, *v)
	}
	return nil
}

// signalNames lists the signals a client may send, without the SIG prefix.
var signalNames = map[string]syscall.Signal{
	"HUP":   syscall.SIGHUP,
	"INT":   syscall.SIGINT,
	"QUIT":  syscall.SIGQUIT,
	"KILL":  syscall.SIGKILL,
	"TERM":  syscall.SIGTERM,
	"USR1":  sigUSR1,
	"USR2":  sigUSR2,
	"WINCH": sigWINCH,
	"CONT":  sigCONT,
	"STOP":  sigSTOP,
	"TSTP":  sigTSTP,
	"ALRM":  syscall.SIGALRM,
	"ABRT":  syscall.SIGABRT,
}

// parseSignal accepts a signal name with or without the SIG prefix, in any
// case: "SIGINT", "INT" and "sigint" all name SIGINT.
func parseSignal(name string) (syscall.Signal, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")
	sig, ok := signalNames[n]
	if !ok || sig == 0 {
		return 0, fmt.Errorf("%w: unknown signal %q", errInvalidFrame, name)
	}
	return sig, nil
}
