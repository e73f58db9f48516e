package sandbox

import (
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"testing"
)

func TestListQuery(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		replyJSON(w, 200, ListSandboxesResponse{Items: []SandboxInfo{{ID: "a"}}})
	})
	_, err := s.client(t).List(testCtx(t), ListOptions{
		States:   []string{StateRunning, StatePaused},
		Metadata: map[string]string{"team": "ml", "project": "Apollo & co"},
		Page:     2, PageSize: 50,
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	raw := s.only(t, "GET", "/v1/sandboxes").RawQuery
	q, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatalf("query %q: %v", raw, err)
	}
	if !reflect.DeepEqual(q["state"], []string{"Running", "Paused"}) || q.Get("page") != "2" || q.Get("pageSize") != "50" {
		t.Errorf("query = %v, want state repeated, page 2, pageSize 50", q)
	}
	if q.Get("metadata") != "project=Apollo+%26+co&team=ml" {
		t.Errorf("metadata = %q, want one encoded k=v&k2=v2 string", q.Get("metadata"))
	}
	meta, _ := url.ParseQuery(q.Get("metadata"))
	if meta.Get("project") != "Apollo & co" || meta.Get("team") != "ml" {
		t.Errorf("metadata decodes to %v", meta)
	}
}

func TestAllPages(t *testing.T) {
	s := newSDKServer(t)
	s.mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		replyJSON(w, 200, ListSandboxesResponse{
			Items:      []SandboxInfo{{ID: "p" + strconv.Itoa(page) + "a"}, {ID: "p" + strconv.Itoa(page) + "b"}},
			Pagination: PaginationInfo{Page: page, PageSize: 2, HasNextPage: page < 3},
		})
	})
	var ids []string
	for info, err := range s.client(t).All(testCtx(t), ListOptions{PageSize: 2}) {
		if err != nil {
			t.Fatalf("All: %v", err)
		}
		ids = append(ids, info.ID)
	}
	want := []string{"p1a", "p1b", "p2a", "p2b", "p3a", "p3b"}
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("All = %v, want %v", ids, want)
	}
	// Breaking early fetches no further page.
	before := len(s.requests("GET", "/v1/sandboxes"))
	for range s.client(t).All(testCtx(t), ListOptions{}) {
		break
	}
	if got := len(s.requests("GET", "/v1/sandboxes")) - before; got != 1 {
		t.Errorf("All stopped after one item fetched %d pages, want 1", got)
	}
}

func TestAllError(t *testing.T) {
	s := newSDKServer(t)
	n := 0
	for _, err := range s.client(t).All(testCtx(t), ListOptions{}) {
		n++
		if !IsNotFound(err) {
			t.Errorf("All against a server without the route = %v, want IsNotFound", err)
		}
	}
	if n != 1 {
		t.Errorf("All yielded %d times on error, want 1", n)
	}
}
