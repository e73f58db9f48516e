package store

import (
	"context"
	"regexp"
	"testing"
)

// TestIDStableAndDistinct checks that a store keeps its identity across
// reopenings and that two store files get different ones.
func TestIDStableAndDistinct(t *testing.T) {
	ctx := context.Background()
	st, path := openTemp(t)
	id, err := st.ID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(id) {
		t.Fatalf("ID = %q, want 16 lowercase hex digits", id)
	}
	if again, err := st.ID(ctx); err != nil || again != id {
		t.Fatalf("second ID = %q, %v; want %q", again, err, id)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if got, err := re.ID(ctx); err != nil || got != id {
		t.Fatalf("ID after reopening = %q, %v; want %q", got, err, id)
	}

	other, _ := openTemp(t)
	oid, err := other.ID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if oid == id {
		t.Fatalf("two store files share the identity %q", id)
	}
}
