package store

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

func TestCreateJournalSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "opensandbox.db")
	st, err := Open(Options{Path: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	for _, id := range []string{"b", "a", "c"} {
		if err := st.RecordCreate(ctx, id, at); err != nil {
			t.Fatalf("RecordCreate(%s): %v", id, err)
		}
	}
	if err := st.ClearCreate(ctx, "c"); err != nil {
		t.Fatalf("ClearCreate(c): %v", err)
	}
	if err := st.ClearCreate(ctx, "never-recorded"); err != nil {
		t.Errorf("ClearCreate of a missing entry = %v; want nil", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	st, err = Open(Options{Path: path})
	if err != nil {
		t.Fatalf("Open (again): %v", err)
	}
	defer st.Close()
	got, err := st.PendingCreates(ctx)
	want := map[string]time.Time{"a": at.UTC(), "b": at.UTC()}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("PendingCreates after reopen = %+v, %v; want %+v", got, err, want)
	}
	for id := range got {
		if err := st.ClearCreate(ctx, id); err != nil {
			t.Fatalf("ClearCreate(%s): %v", id, err)
		}
	}
	if got, err := st.PendingCreates(ctx); err != nil || len(got) != 0 {
		t.Errorf("PendingCreates after clearing all = %+v, %v; want none", got, err)
	}
}

func TestCreateJournalRejectsEmptyIDAndCancelledContext(t *testing.T) {
	st, _ := openTemp(t)
	if err := st.RecordCreate(context.Background(), "", time.Now()); !errors.Is(err, runtime.ErrInvalid) {
		t.Errorf("RecordCreate(\"\") = %v; want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.RecordCreate(ctx, "a", time.Now()); !errors.Is(err, context.Canceled) {
		t.Errorf("RecordCreate with a cancelled context = %v; want context.Canceled", err)
	}
	if _, err := st.PendingCreates(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("PendingCreates with a cancelled context = %v; want context.Canceled", err)
	}
}
