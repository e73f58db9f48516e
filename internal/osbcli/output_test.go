package osbcli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func sampleSandbox() sandbox.SandboxInfo {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return sandbox.SandboxInfo{
		ID:         "sb-1",
		Image:      &sandbox.ImageSpec{URI: "opensandbox/base:latest"},
		Status:     sandbox.SandboxStatus{State: "Running"},
		Metadata:   map[string]string{"team": "ai", "env": "dev"},
		Entrypoint: []string{"tail", "-f", "/dev/null"},
		CreatedAt:  created,
	}
}

func TestRenderFormats(t *testing.T) {
	a := &app{}
	v := a.sandboxView(sampleSandbox())
	tests := []struct {
		format string
		wants  []string
	}{
		{formatJSON, []string{"{\n  \"id\": \"sb-1\",", `"state": "Running"`, `"entrypoint": [`}},
		{formatYAML, []string{"id: sb-1\n", "status:\n  state: Running\n", "entrypoint:\n  - tail\n", `createdAt: "2026-01-02T03:04:05Z"`}},
		{formatRaw, []string{`{"id":"sb-1","image":{"uri":"opensandbox/base:latest"}`}},
		{formatTable, []string{"ID          sb-1\n", "METADATA    env=dev,team=ai\n", "EXPIRES     never (manual cleanup)\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := render(&b, tt.format, v); err != nil {
				t.Fatalf("render: %v", err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(b.String(), w) {
					t.Errorf("render(%s) =\n%s\nwant it to contain %q", tt.format, b.String(), w)
				}
			}
		})
	}
}

func TestRenderRawPassesBytes(t *testing.T) {
	var b bytes.Buffer
	raw := []byte(`{"as":"sent"}` + "\n")
	if err := render(&b, formatRaw, view{data: map[string]int{"x": 1}, raw: raw}); err != nil {
		t.Fatal(err)
	}
	if b.String() != string(raw) {
		t.Errorf("raw = %q, want %q", b.String(), raw)
	}
}

func TestTableAlignsColumns(t *testing.T) {
	var b bytes.Buffer
	err := render(&b, formatTable, view{table: func(t *tableWriter) {
		t.row("ID", "STATE")
		t.row("a-long-id", "Running")
		t.row("b", "Paused\twith tab")
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := "ID         STATE\na-long-id  Running\nb          Paused with tab\n"
	if b.String() != want {
		t.Errorf("table =\n%q\nwant\n%q", b.String(), want)
	}
}

func TestColorKeepsAlignment(t *testing.T) {
	var b bytes.Buffer
	render(&b, formatTable, view{table: func(t *tableWriter) {
		t.row("ID", colorPad(true, "STATE"), "X")
		t.row("a", colorState(true, "Running"), "1")
		t.row("bb", colorState(true, "Weird"), "2")
	}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	col := -1
	for i, l := range lines {
		c := strings.LastIndex(l, " ") // start of the last column
		if i > 0 && c != col {
			t.Errorf("line %d: last column at %d, want %d:\n%s", i, c, col, b.String())
		}
		col = c
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"ls | wc -l"}, "ls | wc -l"},
		{[]string{"sh", "-c", "exit 3"}, "sh -c 'exit 3'"},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{"ls", "-la", "/tmp/a.b"}, "ls -la /tmp/a.b"},
	}
	for _, tt := range tests {
		if got := shellJoin(tt.args); got != tt.want {
			t.Errorf("shellJoin(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestOctalMode(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"644", 644, true}, {"0755", 755, true}, {"", 0, true}, {"4755", 4755, true},
		{"9", 0, false}, {"rwx", 0, false}, {"17777", 0, false},
	}
	for _, tt := range tests {
		got, err := octalMode(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("octalMode(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
