package apierror

import (
	"errors"
	"net/http"

	"github.com/opensandbox-go/opensandbox/internal/httpmw"
)

// CodeRequestTimeout is the code of a 408: the client sent its request
// body too slowly (httpmw.BoundBody).
const CodeRequestTimeout = "REQUEST_TIMEOUT"

// BodyTimeout returns the 408 REQUEST_TIMEOUT for err when reading a
// request body failed with httpmw.ErrBodyTimeout, nil otherwise.
func BodyTimeout(err error) *Error {
	if !errors.Is(err, httpmw.ErrBodyTimeout) {
		return nil
	}
	return Wrap(err, http.StatusRequestTimeout, CodeRequestTimeout, "the request body arrived too slowly")
}
