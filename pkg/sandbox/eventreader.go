package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// EventReader decodes an execution stream: JSON objects each followed by a
// blank line. Lines of the SSE form "data: {...}" are accepted too, so the
// reader works against upstream servers and proxies that re-frame events.
type EventReader struct {
	sc *bufio.Scanner
}

// NewEventReader returns a reader of the events in r.
func NewEventReader(r io.Reader) *EventReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return &EventReader{sc: sc}
}

// Next returns the next event, or io.EOF at the end of the stream.
func (er *EventReader) Next() (StreamEvent, error) {
	for er.sc.Scan() {
		line := bytes.TrimSpace(er.sc.Bytes())
		if len(line) == 0 || line[0] == ':' {
			continue
		}
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			line = bytes.TrimSpace(rest)
		}
		if len(line) == 0 || line[0] != '{' {
			continue // other SSE fields (event:, id:, retry:)
		}
		var ev StreamEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return StreamEvent{}, fmt.Errorf("decode stream event %q: %w", truncate(line, 200), err)
		}
		return ev, nil
	}
	if err := er.sc.Err(); err != nil {
		return StreamEvent{}, fmt.Errorf("read event stream: %w", err)
	}
	return StreamEvent{}, io.EOF
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
