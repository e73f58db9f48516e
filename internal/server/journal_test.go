package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// journalRuntime wraps the stub to look at the journal while a create runs
// and to make Delete fail on demand.
type journalRuntime struct {
	*stubRuntime
	store CreateJournal

	mu           sync.Mutex
	seenDuring   []string      // ids journaled while Create ran
	hold         chan struct{} // when set, Create waits for it to close
	deleteErr    error
	deleteCalled []string
}

func (r *journalRuntime) Create(ctx context.Context, spec runtime.Spec) (runtime.Sandbox, error) {
	pending, err := r.store.PendingCreates(ctx)
	if err != nil {
		return runtime.Sandbox{}, err
	}
	r.mu.Lock()
	if _, ok := pending[spec.ID]; ok {
		r.seenDuring = append(r.seenDuring, spec.ID)
	}
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return r.stubRuntime.Create(ctx, spec)
}

func (r *journalRuntime) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	r.deleteCalled = append(r.deleteCalled, id)
	err := r.deleteErr
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.stubRuntime.Delete(ctx, id)
}

func newJournalEnv(t *testing.T) (*testEnv, *journalRuntime) {
	t.Helper()
	var jr *journalRuntime
	e := newEnv(t, func(c *Config) {
		jr = &journalRuntime{stubRuntime: c.Runtime.(*stubRuntime), store: c.Store}
		c.Runtime = jr
	})
	return e, jr
}

func pendingIDs(t *testing.T, j CreateJournal) []string {
	t.Helper()
	pending, err := j.PendingCreates(context.Background())
	if err != nil {
		t.Fatalf("PendingCreates: %v", err)
	}
	var ids []string
	for id := range pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func TestCreateIsJournaledUntilAnswered(t *testing.T) {
	e, jr := newJournalEnv(t)
	res := e.do("POST", "/sandboxes", createBody())
	if res.status != http.StatusAccepted {
		t.Fatalf("create: %s", res)
	}
	var created struct{ ID string }
	if err := json.Unmarshal(res.body, &created); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(jr.seenDuring, []string{created.ID}) {
		t.Errorf("journaled while the runtime created: %v; want [%s]", jr.seenDuring, created.ID)
	}
	if ids := pendingIDs(t, e.store); len(ids) != 0 {
		t.Errorf("journal after the answer: %v; want empty", ids)
	}
	if !jr.has(created.ID) {
		t.Errorf("the created sandbox is gone")
	}
}

func TestFailedCreateSettlesItsJournalEntry(t *testing.T) {
	e, jr := newJournalEnv(t)
	jr.createErr = fmt.Errorf("engine said no")
	// Delete of what a failed create left fails too (the engine is away):
	// the entry stays for the reaper.
	jr.deleteErr = fmt.Errorf("engine away: %w", runtime.ErrUnavailable)
	if res := e.do("POST", "/sandboxes", createBody()); res.status != http.StatusInternalServerError {
		t.Fatalf("create with a failing runtime: %s; want 500", res)
	}
	ids := pendingIDs(t, e.store)
	if len(ids) != 1 || !slices.Equal(jr.deleteCalled, ids) {
		t.Fatalf("journal after a failed create whose cleanup failed: %v (deletes %v); want the one id, deleted once", ids, jr.deleteCalled)
	}
	if e.srv.Lifecycle().ReapUnanswered(context.Background()) {
		t.Errorf("ReapUnanswered reported done while Delete fails")
	}
	if got := pendingIDs(t, e.store); !slices.Equal(got, ids) {
		t.Errorf("journal after a failed reap: %v; want %v", got, ids)
	}
	jr.mu.Lock()
	jr.deleteErr = nil
	jr.mu.Unlock()
	if !e.srv.Lifecycle().ReapUnanswered(context.Background()) {
		t.Errorf("ReapUnanswered reported not done once Delete works")
	}
	if got := pendingIDs(t, e.store); len(got) != 0 {
		t.Errorf("journal after a successful reap: %v; want empty", got)
	}

	// A failed create whose runtime cleaned up leaves no entry at once.
	if res := e.do("POST", "/sandboxes", createBody()); res.status != http.StatusInternalServerError {
		t.Fatalf("second create: %s; want 500", res)
	}
	if got := pendingIDs(t, e.store); len(got) != 0 {
		t.Errorf("journal after a failed create: %v; want empty", got)
	}
}

func TestRunDeletesSandboxesOfUnansweredCreates(t *testing.T) {
	e, jr := newJournalEnv(t)
	ctx := context.Background()
	jr.add(runtime.Sandbox{ID: "orphan"})
	jr.add(runtime.Sandbox{ID: "answered"})
	for _, id := range []string{"orphan", "never-made"} {
		if err := e.store.RecordCreate(ctx, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// A create of this process in flight is left alone: one waits in the
	// runtime while Run reaps.
	hold := make(chan struct{})
	jr.mu.Lock()
	jr.hold = hold
	jr.mu.Unlock()
	created := make(chan int, 1)
	go func() { created <- e.do("POST", "/sandboxes", createBody()).status }()
	var inflight string
	deadline := time.Now().Add(10 * time.Second)
	for inflight == "" {
		for _, id := range pendingIDs(t, e.store) {
			if id != "orphan" && id != "never-made" {
				inflight = id
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held create was never journaled: %v", pendingIDs(t, e.store))
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.run()
	for !slices.Equal(pendingIDs(t, e.store), []string{inflight}) {
		if time.Now().After(deadline) {
			t.Fatalf("journal still %v after 10s; want only the create in flight %s", pendingIDs(t, e.store), inflight)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(hold)
	if status := <-created; status != http.StatusAccepted {
		t.Fatalf("the held create answered %d; want 202", status)
	}
	if got := pendingIDs(t, e.store); len(got) != 0 {
		t.Errorf("journal after the held create was answered: %v; want empty", got)
	}
	if !jr.has(inflight) {
		t.Errorf("the sandbox of the create in flight was deleted")
	}
	if jr.has("orphan") {
		t.Errorf("the sandbox of the unanswered create is still there")
	}
	if !jr.has("answered") {
		t.Errorf("a sandbox outside the journal was deleted")
	}
}
