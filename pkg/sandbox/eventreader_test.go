package sandbox

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestEventReader(t *testing.T) {
	in := `{"type":"init","text":"cmd-1","timestamp":1}

{"type":"stdout","text":"hi","timestamp":2}

data: {"type":"stderr","text":"oops","timestamp":3}

: comment
event: x
{"type":"error","timestamp":4,"error":{"ename":"CommandExecError","evalue":"2","traceback":["exit status 2"]}}

`
	r := NewEventReader(strings.NewReader(in))
	var got []StreamEvent
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		got = append(got, ev)
	}
	want := []StreamEvent{
		{Type: EventInit, Text: "cmd-1", Timestamp: 1},
		{Type: EventStdout, Text: "hi", Timestamp: 2},
		{Type: EventStderr, Text: "oops", Timestamp: 3},
		{Type: EventError, Timestamp: 4, Error: &StreamError{Name: ErrNameCommandExec, Value: "2", Traceback: []string{"exit status 2"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events = %+v, want %+v", got, want)
	}
}

func TestEventReaderBadFrame(t *testing.T) {
	r := NewEventReader(strings.NewReader("{not json}\n\n"))
	if _, err := r.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("Next on malformed frame = %v, want a decode error", err)
	}
}
