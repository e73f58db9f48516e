package sandbox

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestAPIErrorBodies checks the three shapes of error body: the servers'
// {code,message}, execd's 401 {"error": ...} and anything else as text.
func TestAPIErrorBodies(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RequestIDHeader, "req-"+r.PathValue("id"))
		switch r.PathValue("id") {
		case "coded":
			replyJSON(w, 404, ErrorResponse{Code: "SANDBOX_NOT_FOUND", Message: "sandbox coded not found"})
		case "execd":
			replyJSON(w, 401, map[string]string{"error": "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN"})
		case "text":
			http.Error(w, "upstream exploded", 409)
		case "huge":
			w.WriteHeader(400)
			w.Write([]byte(strings.Repeat("x", 1<<20)))
		}
	})
	c := s.client(t)
	for _, tc := range []struct {
		id   string
		want APIError
		is   func(error) bool
	}{
		{"coded", APIError{StatusCode: 404, Code: "SANDBOX_NOT_FOUND", Message: "sandbox coded not found", RequestID: "req-coded"}, IsNotFound},
		{"execd", APIError{StatusCode: 401, Message: "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN", RequestID: "req-execd"}, IsUnauthorized},
		{"text", APIError{StatusCode: 409, Message: "upstream exploded", RequestID: "req-text"}, IsConflict},
	} {
		_, err := c.Get(testCtx(t), tc.id)
		var ae *APIError
		if !errors.As(err, &ae) {
			t.Fatalf("Get(%s) = %v, want an *APIError", tc.id, err)
		}
		if *ae != tc.want {
			t.Errorf("Get(%s) error = %+v, want %+v", tc.id, *ae, tc.want)
		}
		if !tc.is(err) {
			t.Errorf("Get(%s): class predicate false for %v", tc.id, err)
		}
	}
	_, err := c.Get(testCtx(t), "huge")
	var ae *APIError
	if !errors.As(err, &ae) || len(ae.Message) > maxErrorBody {
		t.Errorf("Get(huge): message of %d bytes, want at most %d", len(ae.Message), maxErrorBody)
	}
}

func TestAPIErrorPredicates(t *testing.T) {
	err := fmt.Errorf("kill: %w", &APIError{StatusCode: 404})
	if !IsNotFound(err) || IsConflict(err) || IsUnauthorized(err) {
		t.Errorf("predicates on a wrapped 404 = %v %v %v, want true false false", IsNotFound(err), IsConflict(err), IsUnauthorized(err))
	}
	if IsNotFound(errors.New("not found")) {
		t.Error("IsNotFound(plain error) = true, want false")
	}
	got := (&APIError{StatusCode: 404, Code: "X", Message: "m", RequestID: "r"}).Error()
	if want := "opensandbox: 404 X: m (request r)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
