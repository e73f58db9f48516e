package server

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := parsePage(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	meta, err := parseMetadataFilter(q["metadata"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	states := parseStates(q)

	all, err := s.lc.List(r.Context())
	if err != nil {
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	items := make([]sandbox.SandboxInfo, 0, len(all))
	for _, rs := range all {
		if !states.match(rs.State) {
			continue
		}
		v := view(rs)
		if !meta.match(v.Metadata) {
			continue
		}
		items = append(items, v)
	}
	sortNewestFirst(items, func(v sandbox.SandboxInfo) (string, int64) { return v.ID, v.CreatedAt.UnixNano() })
	pageItems, info := paginate(items, page)
	apierror.WriteJSON(w, http.StatusOK, sandbox.ListSandboxesResponse{Items: pageItems, Pagination: info})
}

// sortNewestFirst orders items by creation time, newest first, then by id.
func sortNewestFirst[T any](items []T, key func(T) (id string, created int64)) {
	slices.SortFunc(items, func(a, b T) int {
		ida, ca := key(a)
		idb, cb := key(b)
		if c := cmp.Compare(cb, ca); c != 0 {
			return c
		}
		return cmp.Compare(ida, idb)
	})
}

// metadataFilter is a set of key=value pairs that must all be present.
type metadataFilter map[string][]string

// parseMetadataFilter reads the metadata query parameter(s): each value is
// itself a URL-encoded query string of key=value pairs
// ("project%3DApollo%26team%3Dai"), all of which must match. A pair
// without "=", an empty key or a bad escape is 400 INVALID_METADATA_FORMAT.
func parseMetadataFilter(values []string) (metadataFilter, error) {
	f := metadataFilter{}
	for _, raw := range values {
		if raw == "" {
			continue
		}
		for _, pair := range strings.Split(raw, "&") {
			if pair == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, badMetadataFilter("pair %q has no '='", pair)
			}
			key, err := url.QueryUnescape(k)
			if err != nil {
				return nil, badMetadataFilter("key %q: %v", k, err)
			}
			val, err := url.QueryUnescape(v)
			if err != nil {
				return nil, badMetadataFilter("value %q: %v", v, err)
			}
			if key == "" {
				return nil, badMetadataFilter("pair %q has an empty key", pair)
			}
			f[key] = append(f[key], val)
		}
	}
	return f, nil
}

func badMetadataFilter(format string, args ...any) *apierror.Error {
	e := apierror.BadRequest(apierror.CodeInvalidMetadataFormat, format, args...)
	e.Message = "metadata filter: " + e.Message + ` (want a URL-encoded query string such as "project%3DApollo%26team%3Dai")`
	return e
}

func (f metadataFilter) match(m map[string]string) bool {
	for k, vals := range f {
		got, ok := m[k]
		if !ok {
			return false
		}
		for _, v := range vals {
			if got != v {
				return false
			}
		}
	}
	return true
}
