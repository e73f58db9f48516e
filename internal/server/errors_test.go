package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestErrorClassMapping(t *testing.T) {
	wrap := func(class error) error { return fmt.Errorf("docker: sandbox x: %w", class) }
	tests := []struct {
		name   string
		err    error
		codes  classCodes
		status int
		code   string
		// msg is a fragment of the public message; hidden, when set, must
		// not appear in it.
		msg, hidden string
	}{
		{"not found", wrap(runtime.ErrNotFound), sandboxCodes, 404, apierror.CodeSandboxNotFound, `sandbox "x" not found`, "docker"},
		{"snapshot not found", wrap(runtime.ErrNotFound), snapshotCodes, 404, apierror.CodeSnapshotNotFound, "not found", ""},
		{"invalid", wrap(runtime.ErrInvalid), classCodes{}, 400, apierror.CodeInvalidRequest, "invalid request", ""},
		{"conflict default", wrap(runtime.ErrConflict), classCodes{}, 409, apierror.CodeInvalidState, "conflict", ""},
		{"conflict running", wrap(runtime.ErrConflict), runningCodes, 409, apierror.CodeSandboxNotRunning, "conflict", ""},
		{"host path not allowed", wrap(runtime.ErrHostPathNotAllowed), classCodes{}, 400, apierror.CodeHostPathNotAllowed, "host path not allowed", ""},
		{"not supported", wrap(runtime.ErrNotSupported), sandboxCodes, 400, apierror.CodeAPINotSupported, "not supported", ""},
		{"unavailable", wrap(runtime.ErrUnavailable), classCodes{}, 503, apierror.CodeRuntimeUnavailable, "unavailable", "docker"},
		{"deadline", fmt.Errorf("inspect: %w", context.DeadlineExceeded), classCodes{}, 503, apierror.CodeRuntimeUnavailable, "unavailable", "inspect"},
		{"unknown hidden", errors.New("socket /var/run/docker.sock: secret detail"), classCodes{}, 500, apierror.CodeInternal, "internal error", "secret"},
		{"unknown shown for create", errors.New("engine said no"), classCodes{other: apierror.CodeSandboxStartFailed, showOther: true}, 500, apierror.CodeSandboxStartFailed, "engine said no", ""},
		{"api error passes through", apierror.New(418, "TEAPOT", "short and stout"), classCodes{}, 418, "TEAPOT", "stout", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fromRuntime(tc.err, tc.codes, subjectSandbox("x"))
			if got.Status != tc.status || got.Code != tc.code {
				t.Errorf("fromRuntime(%v) = %d %s, want %d %s", tc.err, got.Status, got.Code, tc.status, tc.code)
			}
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("fromRuntime(%v).Message = %q, want it to mention %q", tc.err, got.Message, tc.msg)
			}
			if tc.hidden != "" && strings.Contains(got.Message, tc.hidden) {
				t.Errorf("fromRuntime(%v).Message = %q leaks %q", tc.err, got.Message, tc.hidden)
			}
			if got.Status != statusFor(tc.err) && !strings.HasPrefix(tc.name, "api error") {
				t.Errorf("statusFor(%v) = %d, fromRuntime says %d", tc.err, statusFor(tc.err), got.Status)
			}
		})
	}
}

func TestCreateErrorMapping(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		snapshotID string
		status     int
		code, msg  string
	}{
		{"pull failure", fmt.Errorf("docker: pull image nope: manifest unknown: %w", runtime.ErrImagePull), "", 400, apierror.CodeImagePullFailed, "manifest unknown"},
		{"host path not allowed", fmt.Errorf("docker: volume h: host path /etc is not allowed: %w", runtime.ErrHostPathNotAllowed), "", 400, apierror.CodeHostPathNotAllowed, "/etc is not allowed"},
		{"other invalid", fmt.Errorf("docker: bad spec: %w", runtime.ErrInvalid), "", 400, apierror.CodeInvalidRequest, "bad spec"},
		{"entrypoint exits at once", errors.New("docker: sandbox x: container stopped before execd was ready (exited with code 3)"), "", 500, apierror.CodeSandboxStartFailed, "exited with code 3"},
		{"missing volume", fmt.Errorf("docker: volume cache: %w", runtime.ErrNotFound), "", 400, apierror.CodeVolumeNotFound, "volume cache"},
		{"snapshot image gone", fmt.Errorf("docker: snapshot: %w", runtime.ErrNotFound), "snap", 404, apierror.CodeSnapshotNotFound, "snap"},
		{"engine down", fmt.Errorf("docker: %w", runtime.ErrUnavailable), "", 503, apierror.CodeRuntimeUnavailable, "unavailable"},
		{"not supported", fmt.Errorf("docker: gpus: %w", runtime.ErrNotSupported), "", 400, apierror.CodeAPINotSupported, "gpus"},
		{"disk limit not enforced", fmt.Errorf("docker: storage driver overlay2 on extfs: %w", runtime.ErrDiskLimitUnsupported), "", 400, apierror.CodeDiskLimitUnsupported, "overlay2 on extfs"},
		{"start failure", errors.New("docker: start sandbox: OCI runtime create failed"), "", 500, apierror.CodeSandboxStartFailed, "OCI runtime create failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.rt.createErr = tc.err
			b := createBody()
			if tc.snapshotID != "" {
				delete(b, "image")
				b["snapshotId"] = tc.snapshotID
				putSnapshot(t, e, tc.snapshotID, "sb", "Ready")
			}
			r := e.do("POST", "/v1/sandboxes", b)
			wantError(t, "POST /v1/sandboxes with "+tc.name, r, tc.status, tc.code, tc.msg)
		})
	}
}

func TestStatusForClasses(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{runtime.ErrNotFound, http.StatusNotFound},
		{runtime.ErrInvalid, http.StatusBadRequest},
		{runtime.ErrConflict, http.StatusConflict},
		{runtime.ErrNotSupported, http.StatusBadRequest},
		{runtime.ErrUnavailable, http.StatusServiceUnavailable},
		{errors.New("other"), http.StatusInternalServerError},
	}
	for _, tc := range tests {
		if got := statusFor(fmt.Errorf("wrapped: %w", tc.err)); got != tc.want {
			t.Errorf("statusFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
