package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

func TestGetSandbox(t *testing.T) {
	e := newEnv(t)
	exp := time.Now().Add(48 * time.Hour).Truncate(time.Second).In(time.FixedZone("x", 3600))
	sb := fakeSandbox("sb1")
	sb.Metadata = map[string]string{"team": "ai"}
	sb.ExpiresAt = &exp
	sb.Platform = &runtime.Platform{OS: "linux", Arch: "amd64"}
	e.rt.add(sb)

	r := e.do("GET", "/v1/sandboxes/sb1", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/sandboxes/sb1 = %s", r)
	}
	got := decode[sandbox.SandboxInfo](t, r)
	if got.Image == nil || got.Image.URI != "busybox:latest" || got.Image.Auth != nil {
		t.Errorf("image = %+v, want uri only", got.Image)
	}
	if got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("expiresAt = %v, want %v in UTC", got.ExpiresAt, exp)
	}
	if !reflect.DeepEqual(got.Metadata, sb.Metadata) || got.Status.State != sandbox.StateRunning || got.Platform.Arch != "amd64" {
		t.Errorf("sandbox = %+v", got)
	}
	if strings.Contains(string(r.body), "token") {
		t.Errorf("GET body %s leaks the execd token", r.body)
	}
	// Overrides replace what the runtime reports.
	later := exp.Add(time.Hour).UTC()
	e.store.PutOverrides(t.Context(), "sb1", Overrides{Metadata: map[string]string{"team": "ml"}, ExpiresAt: &later})
	got = decode[sandbox.SandboxInfo](t, e.do("GET", "/sandboxes/sb1", nil))
	if got.Metadata["team"] != "ml" || !got.ExpiresAt.Equal(later) {
		t.Errorf("with overrides: metadata %v expiresAt %v, want team=ml and %v", got.Metadata, got.ExpiresAt, later)
	}
	wantError(t, "GET missing", e.do("GET", "/v1/sandboxes/nope", nil), 404, apierror.CodeSandboxNotFound, `"nope"`)
}

func TestEmptyFieldsOmitted(t *testing.T) {
	e := newEnv(t)
	sb := fakeSandbox("bare")
	sb.Image, sb.SnapshotID, sb.Reason, sb.Entrypoint = "", "snap-1", "", nil
	sb.LastTransitionAt = time.Time{}
	e.rt.add(sb)
	r := e.do("GET", "/v1/sandboxes/bare", nil)
	var raw map[string]any
	json.Unmarshal(r.body, &raw)
	for _, k := range []string{"image", "platform", "metadata", "expiresAt"} {
		if _, ok := raw[k]; ok {
			t.Errorf("GET bare sandbox has %q: %s", k, r.body)
		}
	}
	st := raw["status"].(map[string]any)
	if _, ok := st["lastTransitionAt"]; ok {
		t.Errorf("status has lastTransitionAt though unknown: %s", r.body)
	}
	if ep, ok := raw["entrypoint"].([]any); !ok || len(ep) != 0 {
		t.Errorf("entrypoint = %v, want [] (the field is required)", raw["entrypoint"])
	}
}

func TestListSandboxes(t *testing.T) {
	e := newEnv(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 25 sandboxes: sb00 oldest ... sb24 newest; sb10 and sb11 share a time.
	for i := range 25 {
		sb := fakeSandbox(fmt.Sprintf("sb%02d", i))
		sb.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		if i == 11 {
			sb.CreatedAt = base.Add(10 * time.Minute)
		}
		sb.Metadata = map[string]string{"parity": []string{"even", "odd"}[i%2]}
		if i%5 == 0 {
			sb.State = sandbox.StatePaused
			sb.Metadata["five"] = "yes"
		}
		e.rt.add(sb)
	}
	// An override changes what the filter sees.
	e.store.PutOverrides(t.Context(), "sb03", Overrides{Metadata: map[string]string{"parity": "even", "patched": "true"}})

	ids := func(r reply) []string {
		var out []string
		for _, s := range decode[sandbox.ListSandboxesResponse](t, r).Items {
			out = append(out, s.ID)
		}
		return out
	}
	tests := []struct {
		query    string
		want     []string
		page     sandbox.PaginationInfo
		wantNone bool
	}{
		{"", []string{"sb24", "sb23", "sb22", "sb21", "sb20", "sb19", "sb18", "sb17", "sb16", "sb15", "sb14", "sb13", "sb12", "sb10", "sb11", "sb09", "sb08", "sb07", "sb06", "sb05"},
			sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 25, TotalPages: 2, HasNextPage: true}, false},
		{"?page=2", []string{"sb04", "sb03", "sb02", "sb01", "sb00"},
			sandbox.PaginationInfo{Page: 2, PageSize: 20, TotalItems: 25, TotalPages: 2}, false},
		{"?page=3&pageSize=10", []string{"sb04", "sb03", "sb02", "sb01", "sb00"},
			sandbox.PaginationInfo{Page: 3, PageSize: 10, TotalItems: 25, TotalPages: 3}, false},
		{"?page=9", nil, sandbox.PaginationInfo{Page: 9, PageSize: 20, TotalItems: 25, TotalPages: 2}, true},
		{"?state=paused", []string{"sb20", "sb15", "sb10", "sb05", "sb00"},
			sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 5, TotalPages: 1}, false},
		{"?state=Paused&state=RUNNING&pageSize=1", []string{"sb24"},
			sandbox.PaginationInfo{Page: 1, PageSize: 1, TotalItems: 25, TotalPages: 25, HasNextPage: true}, false},
		{"?state=Terminated", nil, sandbox.PaginationInfo{Page: 1, PageSize: 20}, true},
		{"?metadata=" + "five%3Dyes%26parity%3Deven", []string{"sb20", "sb10", "sb00"},
			sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 3, TotalPages: 1}, false},
		{"?metadata=patched%3Dtrue", []string{"sb03"},
			sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 1, TotalPages: 1}, false},
		{"?metadata=parity%3Dodd&state=Paused", []string{"sb15", "sb05"},
			sandbox.PaginationInfo{Page: 1, PageSize: 20, TotalItems: 2, TotalPages: 1}, false},
	}
	for _, tc := range tests {
		r := e.do("GET", "/v1/sandboxes"+tc.query, nil)
		if r.status != http.StatusOK {
			t.Errorf("GET /v1/sandboxes%s = %s", tc.query, r)
			continue
		}
		got := ids(r)
		if !reflect.DeepEqual(got, tc.want) && !(tc.wantNone && len(got) == 0) {
			t.Errorf("GET /v1/sandboxes%s ids = %v, want %v", tc.query, got, tc.want)
		}
		if p := decode[sandbox.ListSandboxesResponse](t, r).Pagination; p != tc.page {
			t.Errorf("GET /v1/sandboxes%s pagination = %+v, want %+v", tc.query, p, tc.page)
		}
		if tc.wantNone && !strings.Contains(string(r.body), `"items":[]`) {
			t.Errorf("GET /v1/sandboxes%s body %s, want items as an empty array", tc.query, r.body)
		}
	}
}

func TestListQueryErrors(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		query, code, want string
	}{
		{"?page=0", apierror.CodeInvalidRequest, "page"},
		{"?page=x", apierror.CodeInvalidRequest, "page"},
		{"?pageSize=0", apierror.CodeInvalidRequest, "pageSize"},
		{"?pageSize=201", apierror.CodeInvalidRequest, "1 to 200"},
		{"?metadata=novalue", apierror.CodeInvalidMetadataFormat, "no '='"},
		{"?metadata=%3Dv", apierror.CodeInvalidMetadataFormat, "empty key"},
		{"?metadata=a%3D%25zz", apierror.CodeInvalidMetadataFormat, "metadata filter"},
		{"?metadata=%zz", apierror.CodeInvalidMetadataFormat, "metadata filter"},
		{"?page=%zz", apierror.CodeInvalidRequest, "percent-encoding"},
		{"?state=a;b", apierror.CodeInvalidRequest, "percent-encoding"},
	}
	for _, tc := range tests {
		wantError(t, "GET /v1/sandboxes"+tc.query, e.do("GET", "/v1/sandboxes"+tc.query, nil), 400, tc.code, tc.want)
	}
	r := e.do("GET", "/v1/snapshots?pageSize=500", nil)
	wantError(t, "GET /v1/snapshots?pageSize=500", r, 400, apierror.CodeInvalidRequest, "pageSize")
}

func TestParseMetadataFilter(t *testing.T) {
	tests := []struct {
		in   []string
		want metadataFilter
		ok   bool
	}{
		{nil, metadataFilter{}, true},
		{[]string{""}, metadataFilter{}, true},
		{[]string{"a=1"}, metadataFilter{"a": {"1"}}, true},
		{[]string{"a=1&b=2"}, metadataFilter{"a": {"1"}, "b": {"2"}}, true},
		{[]string{"a=1", "b=2"}, metadataFilter{"a": {"1"}, "b": {"2"}}, true},
		{[]string{"a="}, metadataFilter{"a": {""}}, true},
		{[]string{"a=1&&b=2&"}, metadataFilter{"a": {"1"}, "b": {"2"}}, true},
		{[]string{"x.io%2Fteam=ai"}, metadataFilter{"x.io/team": {"ai"}}, true},
		{[]string{"a"}, nil, false},
		{[]string{"=1"}, nil, false},
		{[]string{"a=%zz"}, nil, false},
	}
	for _, tc := range tests {
		got, err := parseMetadataFilter(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("parseMetadataFilter(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	f := metadataFilter{"a": {"1"}, "b": {""}}
	if !f.match(map[string]string{"a": "1", "b": "", "c": "x"}) || f.match(map[string]string{"a": "1"}) || f.match(map[string]string{"a": "2", "b": ""}) {
		t.Errorf("metadataFilter.match does not AND its pairs")
	}
}

func TestPaginate(t *testing.T) {
	items := []int{1, 2, 3, 4, 5}
	tests := []struct {
		page, size int
		want       []int
		info       sandbox.PaginationInfo
	}{
		{1, 2, []int{1, 2}, sandbox.PaginationInfo{Page: 1, PageSize: 2, TotalItems: 5, TotalPages: 3, HasNextPage: true}},
		{3, 2, []int{5}, sandbox.PaginationInfo{Page: 3, PageSize: 2, TotalItems: 5, TotalPages: 3}},
		{4, 2, []int{}, sandbox.PaginationInfo{Page: 4, PageSize: 2, TotalItems: 5, TotalPages: 3}},
		{1 << 62, 200, []int{}, sandbox.PaginationInfo{Page: 1 << 62, PageSize: 200, TotalItems: 5, TotalPages: 1}},
	}
	for _, tc := range tests {
		got, info := paginate(items, pageRequest{tc.page, tc.size})
		if !reflect.DeepEqual(got, tc.want) || info != tc.info {
			t.Errorf("paginate(page %d, size %d) = %v %+v, want %v %+v", tc.page, tc.size, got, info, tc.want, tc.info)
		}
	}
	got, info := paginate([]int(nil), pageRequest{1, 20})
	if got == nil || info.TotalPages != 0 || info.HasNextPage {
		t.Errorf("paginate(empty) = %#v %+v, want non-nil empty slice, 0 pages", got, info)
	}
}

func TestDeleteSandbox(t *testing.T) {
	e := newEnv(t)
	id := e.createSandbox(createBody())
	e.do("PATCH", "/v1/sandboxes/"+id+"/metadata", map[string]any{"k": "v"})
	if _, ok := e.srv.lc.Deadline(id); !ok {
		t.Fatalf("sandbox %s has no expiry deadline after create", id)
	}
	r := e.do("DELETE", "/v1/sandboxes/"+id, nil)
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE = %s, want 204 with no body", r)
	}
	if e.rt.has(id) {
		t.Errorf("runtime still has %s after DELETE", id)
	}
	if _, ok := e.srv.lc.Deadline(id); ok {
		t.Errorf("expiry deadline of %s survived DELETE", id)
	}
	if o, _ := e.store.GetOverrides(t.Context(), id); o.Metadata != nil {
		t.Errorf("overrides of %s survived DELETE: %+v", id, o)
	}
	wantError(t, "DELETE again", e.do("DELETE", "/v1/sandboxes/"+id, nil), 404, apierror.CodeSandboxNotFound)
}

func TestPauseResume(t *testing.T) {
	e := newEnv(t)
	e.rt.add(fakeSandbox("sb1"))
	steps := []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/sandboxes/sb1/resume", 409, apierror.CodeSandboxNotPaused},
		{"/v1/sandboxes/sb1/pause", 202, ""},
		{"/v1/sandboxes/sb1/pause", 409, apierror.CodeSandboxNotRunning},
		{"/sandboxes/sb1/resume", 202, ""},
		{"/v1/sandboxes/nope/pause", 404, apierror.CodeSandboxNotFound},
		{"/v1/sandboxes/nope/resume", 404, apierror.CodeSandboxNotFound},
	}
	for _, s := range steps {
		r := e.do("POST", s.path, nil)
		if s.code == "" {
			if r.status != s.status || len(r.body) != 0 {
				t.Errorf("POST %s = %s, want %d with an empty body", s.path, r, s.status)
			}
			continue
		}
		wantError(t, "POST "+s.path, r, s.status, s.code)
	}
}

func TestPatchMetadata(t *testing.T) {
	e := newEnv(t)
	sb := fakeSandbox("sb1")
	sb.Metadata = map[string]string{"a": "1", "b": "2"}
	e.rt.add(sb)
	steps := []struct {
		body   string
		status int
		code   string
		want   map[string]string
	}{
		{`{"b":null,"c":"3"}`, 200, "", map[string]string{"a": "1", "c": "3"}},
		{`{}`, 200, "", map[string]string{"a": "1", "c": "3"}},
		{`{"a":"x","missing":null}`, 200, "", map[string]string{"a": "x", "c": "3"}},
		{`{"a":1}`, 400, apierror.CodeInvalidRequest, nil},
		{`{"a":{"nested":"x"}}`, 400, apierror.CodeInvalidRequest, nil},
		{`{"opensandbox.io/x":"y"}`, 400, apierror.CodeInvalidRequest, nil},
		{`{"bad key":"y"}`, 400, apierror.CodeInvalidRequest, nil},
		{`[]`, 400, apierror.CodeInvalidRequest, nil},
		{`null`, 400, apierror.CodeInvalidRequest, nil},
		{``, 400, apierror.CodeInvalidRequest, nil},
		// Deleting every key leaves an empty metadata that still
		// overrides the runtime's (it must survive the store's JSON).
		{`{"a":null,"c":null}`, 200, "", nil},
	}
	for _, s := range steps {
		r := e.do("PATCH", "/v1/sandboxes/sb1/metadata", s.body)
		call := "PATCH metadata " + s.body
		if s.code != "" {
			wantError(t, call, r, s.status, s.code)
			continue
		}
		if r.status != s.status {
			t.Fatalf("%s = %s, want %d", call, r, s.status)
		}
		if got := decode[sandbox.SandboxInfo](t, r).Metadata; !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s metadata = %v, want %v", call, got, s.want)
		}
		if got := decode[sandbox.SandboxInfo](t, e.do("GET", "/v1/sandboxes/sb1", nil)).Metadata; !reflect.DeepEqual(got, s.want) {
			t.Errorf("GET after %s metadata = %v, want %v", call, got, s.want)
		}
	}
	wantError(t, "PATCH missing", e.do("PATCH", "/v1/sandboxes/nope/metadata", `{}`), 404, apierror.CodeSandboxNotFound)
}

func TestRenewExpiration(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.MaxTimeout = 24 * time.Hour
	})
	exp := now.Add(time.Hour)
	sb := fakeSandbox("sb1")
	sb.ExpiresAt = &exp
	e.rt.add(sb)
	e.rt.add(fakeSandbox("manual"))

	at := now.Add(3 * time.Hour).In(time.FixedZone("x", -7200))
	r := e.do("POST", "/v1/sandboxes/sb1/renew-expiration", map[string]any{"expiresAt": at.Format(time.RFC3339)})
	if r.status != http.StatusOK {
		t.Fatalf("renew = %s, want 200", r)
	}
	if got := decode[sandbox.RenewSandboxExpirationResponse](t, r).ExpiresAt; !got.Equal(at) || !strings.Contains(string(r.body), "Z") {
		t.Errorf("renew reply %s, want %v in UTC", r.body, at)
	}
	if d, ok := e.srv.lc.Deadline("sb1"); !ok || !d.Equal(at) {
		t.Errorf("deadline after renew = %v %v, want %v", d, ok, at)
	}
	if got := decode[sandbox.SandboxInfo](t, e.do("GET", "/v1/sandboxes/sb1", nil)).ExpiresAt; got == nil || !got.Equal(at) {
		t.Errorf("GET after renew expiresAt = %v, want %v", got, at)
	}

	tests := []struct {
		name, id, body string
		status         int
		code, want     string
	}{
		{"past", "sb1", `{"expiresAt":"2026-06-01T11:00:00Z"}`, 400, apierror.CodeInvalidExpiration, "not in the future"},
		{"now", "sb1", `{"expiresAt":"2026-06-01T12:00:00Z"}`, 400, apierror.CodeInvalidExpiration, "not in the future"},
		{"beyond max", "sb1", `{"expiresAt":"2026-06-02T12:00:01Z"}`, 400, apierror.CodeInvalidExpiration, "maximum"},
		{"manual cleanup", "manual", `{"expiresAt":"2026-06-01T13:00:00Z"}`, 409, apierror.CodeInvalidExpiration, "does not expire"},
		{"missing", "nope", `{"expiresAt":"2026-06-01T13:00:00Z"}`, 404, apierror.CodeSandboxNotFound, "nope"},
		{"no field", "sb1", `{}`, 400, apierror.CodeInvalidRequest, "expiresAt is required"},
		{"not a time", "sb1", `{"expiresAt":"tomorrow"}`, 400, apierror.CodeInvalidRequest, "expiresAt"},
	}
	for _, tc := range tests {
		r := e.do("POST", "/v1/sandboxes/"+tc.id+"/renew-expiration", tc.body)
		wantError(t, "renew "+tc.name, r, tc.status, tc.code, tc.want)
	}
}
