package code

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestJupyterWire(t *testing.T) {
	s := newSigner()
	frames, id, err := s.encode("execute_request", map[string]string{"code": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if string(frames[0]) != idsDelimiter || len(frames) != 6 {
		t.Fatalf("frames = %q, want delimiter, signature and four parts", frames)
	}
	var h msgHeader
	json.Unmarshal(frames[2], &h)
	if h.MsgID != id || h.MsgType != "execute_request" || h.Version != "5.3" || h.Session != s.session || h.Date == "" {
		t.Errorf("header = %+v", h)
	}
	// An iopub topic or routing identities before the delimiter are skipped.
	in := append([][]byte{[]byte("kernel.x.status")}, frames...)
	m, err := s.decode(in)
	if err != nil || m.Header.MsgID != id || string(m.Content) != `{"code":"1"}` {
		t.Errorf("decode = %+v, %v", m, err)
	}
	tampered := append([][]byte{}, frames...)
	tampered[5] = []byte(`{"code":"2"}`)
	if _, err := s.decode(tampered); !errors.Is(err, errBadSignature) {
		t.Errorf("tampered content: err = %v, want signature mismatch", err)
	}
	if _, err := newSigner().decode(frames); !errors.Is(err, errBadSignature) {
		t.Errorf("another key: err = %v, want signature mismatch", err)
	}
	if _, err := s.decode(frames[:4]); err == nil {
		t.Error("short message decoded")
	}
}

func TestMimeBundle(t *testing.T) {
	got := mimeBundle(map[string]any{"text/plain": "4", "image/png": "iVBOR", "text/html": "<b>"})
	if got["text"] != "4" || got["image/png"] != "iVBOR" || got["text/html"] != "<b>" || len(got) != 3 {
		t.Errorf("mimeBundle = %v", got)
	}
}
