package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
)

// parseQuery reads the request's query string strictly. url.URL.Query
// silently drops pairs it cannot decode, which would turn a bad filter
// into no filter; here they are a 400 instead (INVALID_METADATA_FORMAT for
// the metadata filter, INVALID_REQUEST otherwise).
func parseQuery(r *http.Request) (url.Values, error) {
	q := url.Values{}
	for _, pair := range strings.Split(r.URL.RawQuery, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, kerr := url.QueryUnescape(k)
		val, verr := url.QueryUnescape(v)
		if kerr != nil || verr != nil || strings.Contains(pair, ";") {
			if key == "metadata" || k == "metadata" {
				return nil, badMetadataFilter("%q is not valid percent-encoding", v)
			}
			return nil, apierror.BadRequest(apierror.CodeInvalidRequest,
				"query parameter %q is not valid percent-encoding", pair)
		}
		q[key] = append(q[key], val)
	}
	return q, nil
}
