package osbcli

// fileAction is what a file command that changes the sandbox prints in
// json and yaml: the sandbox, the paths it touched and what it did.
type fileAction struct {
	SandboxID   string   `json:"sandboxId"`
	Path        string   `json:"path,omitempty"`
	Paths       []string `json:"paths,omitempty"`
	Source      string   `json:"source,omitempty"`
	Destination string   `json:"destination,omitempty"`
	LocalPath   string   `json:"localPath,omitempty"`
	Size        *int64   `json:"size,omitempty"`
	Mode        int      `json:"mode,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	Group       string   `json:"group,omitempty"`
	Status      string   `json:"status"`
}

// fileActionView prints a file action as one line in a table.
func fileActionView(r fileAction, line string) view {
	return view{data: r, table: func(t *tableWriter) { t.row(line) }}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
