package taskexecutor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Client talks to one executor.
type Client struct {
	// BaseURL is the executor's address, e.g. http://10.244.0.7:5758.
	BaseURL string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// SetTasks makes the executor's task list tasks and returns the list.
func (c *Client) SetTasks(ctx context.Context, tasks []Task) ([]Task, error) {
	if tasks == nil {
		tasks = []Task{}
	}
	var out []Task
	return out, c.do(ctx, http.MethodPost, "/setTasks", tasks, &out)
}

// GetTasks returns the executor's tasks.
func (c *Client) GetTasks(ctx context.Context) ([]Task, error) {
	var out []Task
	return out, c.do(ctx, http.MethodGet, "/getTasks", nil, &out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return fmt.Errorf("task executor %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("task executor %s %s: %w", method, c.BaseURL+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("task executor %s %s: reading reply: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e Error
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return fmt.Errorf("task executor %s %s: %s: %s", method, path, resp.Status, e.Message)
		}
		return fmt.Errorf("task executor %s %s: %s", method, path, resp.Status)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("task executor %s %s: decoding reply: %w", method, path, err)
		}
	}
	return nil
}
