package main

import (
	"context"

	"github.com/opensandbox-go/opensandbox/internal/server"
	"github.com/opensandbox-go/opensandbox/internal/store"
)

// serverStore adapts *store.Store, which stores overrides as JSON of any
// value (it must not import the server), to server.Store.
type serverStore struct{ *store.Store }

var _ server.Store = serverStore{}

func (s serverStore) GetOverrides(ctx context.Context, sandboxID string) (server.Overrides, error) {
	var o server.Overrides
	if _, err := s.Store.GetOverrides(ctx, sandboxID, &o); err != nil {
		return server.Overrides{}, err
	}
	return o, nil
}

func (s serverStore) PutOverrides(ctx context.Context, sandboxID string, o server.Overrides) error {
	return s.Store.PutOverrides(ctx, sandboxID, o)
}
