package code

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The Jupyter messaging protocol (version 5.3) as it travels over ZeroMQ:
// routing identities, the delimiter, an HMAC-SHA256 signature in hex, then
// four JSON frames (header, parent header, metadata, content) and optional
// binary buffers.

const (
	protocolVersion = "5.3"
	idsDelimiter    = "<IDS|MSG>"
)

// msgHeader is the header (and parent header) of a Jupyter message.
type msgHeader struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// jmsg is a received message; Content stays raw until its type is known.
type jmsg struct {
	Header  msgHeader
	Parent  msgHeader
	Content json.RawMessage
}

// signer signs and checks messages with the connection key.
type signer struct {
	key     []byte
	session string
}

func newSigner() *signer {
	return &signer{key: []byte(randomHex(32)), session: randomHex(16)}
}

func (s *signer) sign(frames [][]byte) string {
	mac := hmac.New(sha256.New, s.key)
	for _, f := range frames {
		mac.Write(f)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// encode builds the frames of a new request of msgType; it returns them
// and the new message id.
func (s *signer) encode(msgType string, content any) ([][]byte, string, error) {
	id := randomHex(16)
	header, err := json.Marshal(msgHeader{
		MsgID:    id,
		Session:  s.session,
		Username: "execd",
		Date:     time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		MsgType:  msgType,
		Version:  protocolVersion,
	})
	if err != nil {
		return nil, "", err
	}
	body, err := json.Marshal(content)
	if err != nil {
		return nil, "", err
	}
	parts := [][]byte{header, []byte("{}"), []byte("{}"), body}
	frames := append([][]byte{[]byte(idsDelimiter), []byte(s.sign(parts))}, parts...)
	return frames, id, nil
}

var errBadSignature = errors.New("jupyter message signature mismatch")

// decode parses the frames of a received message, skipping routing
// identities (or the iopub topic) before the delimiter, and checks the
// signature.
func (s *signer) decode(frames [][]byte) (jmsg, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], []byte(idsDelimiter)) {
		i++
	}
	if len(frames)-i < 6 {
		return jmsg{}, fmt.Errorf("jupyter message: %d frames, no delimiter or too few after it", len(frames))
	}
	sig, parts := frames[i+1], frames[i+2:i+6]
	if !hmac.Equal([]byte(s.sign(parts)), sig) {
		return jmsg{}, errBadSignature
	}
	var m jmsg
	if err := json.Unmarshal(parts[0], &m.Header); err != nil {
		return jmsg{}, fmt.Errorf("jupyter message header: %w", err)
	}
	// The parent header of an unsolicited message is {}.
	if err := json.Unmarshal(parts[1], &m.Parent); err != nil {
		return jmsg{}, fmt.Errorf("jupyter message parent header: %w", err)
	}
	m.Content = json.RawMessage(parts[3])
	return m, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
