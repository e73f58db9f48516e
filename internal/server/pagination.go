package server

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// Page size bounds of the list routes.
const (
	defaultPageSize = 20
	maxPageSize     = 200
)

// pageRequest is the page and pageSize query parameters of a list.
type pageRequest struct{ page, size int }

// parsePage reads page (≥1, default 1) and pageSize (1..200, default 20).
func parsePage(q url.Values) (pageRequest, error) {
	p := pageRequest{page: 1, size: defaultPageSize}
	if v, ok := single(q, "page"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, badRequest("page %q must be an integer of at least 1", v)
		}
		p.page = n
	}
	if v, ok := single(q, "pageSize"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return p, badRequest("pageSize %q must be an integer from 1 to %d", v, maxPageSize)
		}
		p.size = n
	}
	return p, nil
}

// single is the last value of query parameter key, if present.
func single(q url.Values, key string) (string, bool) {
	vs := q[key]
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// paginate returns the slice of items on page p and the pagination info.
func paginate[T any](items []T, p pageRequest) ([]T, sandbox.PaginationInfo) {
	total := len(items)
	pages := (total + p.size - 1) / p.size
	info := sandbox.PaginationInfo{
		Page:        p.page,
		PageSize:    p.size,
		TotalItems:  total,
		TotalPages:  pages,
		HasNextPage: p.page < pages,
	}
	start := total
	if p.page-1 <= total/p.size { // else past the end (and the product could overflow)
		start = min((p.page-1)*p.size, total)
	}
	end := min(start+p.size, total)
	page := make([]T, 0, end-start)
	return append(page, items[start:end]...), info
}

// stateFilter is the set of states asked for with repeated state
// parameters (comma-separated values accepted too), compared without
// regard to case; empty means all.
type stateFilter map[string]bool

func parseStates(q url.Values) stateFilter {
	f := stateFilter{}
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				f[strings.ToLower(s)] = true
			}
		}
	}
	return f
}

func (f stateFilter) match(state string) bool {
	return len(f) == 0 || f[strings.ToLower(state)]
}
