package sandbox

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// ListOptions filter and page List and All. Zero fields do not filter.
type ListOptions struct {
	// States keeps sandboxes in any of these states (case-insensitive).
	States []string
	// Metadata keeps sandboxes whose metadata has every pair.
	Metadata map[string]string
	// Page counts from 1; 0 means the server's default (1).
	Page int
	// PageSize is 1-200; 0 means the server's default (20).
	PageSize int
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	for _, s := range o.States {
		q.Add("state", s)
	}
	if len(o.Metadata) > 0 {
		m := url.Values{}
		for k, v := range o.Metadata {
			m.Set(k, v)
		}
		q.Set("metadata", m.Encode())
	}
	setPage(q, o.Page, o.PageSize)
	return q
}

func setPage(q url.Values, page, size int) {
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if size > 0 {
		q.Set("pageSize", strconv.Itoa(size))
	}
}

// List returns one page of sandboxes, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) (ListSandboxesResponse, error) {
	cl := c.lifecycle(http.MethodGet, "/sandboxes")
	cl.query = opts.query()
	var out ListSandboxesResponse
	_, err := c.do(ctx, cl, &out)
	return out, wrap(err, "list sandboxes")
}

// All iterates over every sandbox matching opts, fetching page after page
// from opts.Page (default 1). An error is yielded once, with a zero
// SandboxInfo, and ends the iteration.
func (c *Client) All(ctx context.Context, opts ListOptions) iter.Seq2[SandboxInfo, error] {
	return func(yield func(SandboxInfo, error) bool) {
		if opts.Page <= 0 {
			opts.Page = 1
		}
		for {
			page, err := c.List(ctx, opts)
			if err != nil {
				yield(SandboxInfo{}, err)
				return
			}
			for _, it := range page.Items {
				if !yield(it, nil) {
					return
				}
			}
			if !page.Pagination.HasNextPage || len(page.Items) == 0 {
				return
			}
			opts.Page++
		}
	}
}
