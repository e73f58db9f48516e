package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/opensandbox-go/opensandbox/internal/runtime/docker"
	"github.com/opensandbox-go/opensandbox/internal/serverconfig"
	"github.com/opensandbox-go/opensandbox/internal/store"
)

// instance is the scope of this server's sandboxes on the engine.
type instance struct {
	id string
	// owner is the identity of the server's store; explicit says the id
	// came from [server] instance_id and must be claimed for owner.
	owner    string
	explicit bool
}

// instanceID resolves the server's instance id: [server] instance_id when
// set, else the store's identity (generated once, kept in the store).
func instanceID(ctx context.Context, cfg serverconfig.Config, st *store.Store) (instance, error) {
	owner, err := st.ID(ctx)
	if err != nil {
		return instance{}, err
	}
	if cfg.Server.InstanceID != "" {
		return instance{id: cfg.Server.InstanceID, owner: owner, explicit: true}, nil
	}
	return instance{id: owner, owner: owner}, nil
}

// maxUnscopedLogged bounds the sandbox ids one warning lists.
const maxUnscopedLogged = 20

// scopeInstance claims an explicit instance id for this server's store
// (a second store with the same id is refused: its renewals would be
// invisible to this server's expiry, and the other way round), and warns
// about sandboxes made before instance scoping, which no server adopts.
func scopeInstance(ctx context.Context, rt *docker.Runtime, in instance, logger *slog.Logger) error {
	if in.explicit {
		if err := rt.ClaimInstance(ctx, in.owner); err != nil {
			return fmt.Errorf("server.instance_id: %w", err)
		}
	}
	ids, err := rt.Unscoped(ctx)
	if err != nil {
		logger.Warn("listing sandboxes from before instance scoping", "err", err)
	} else if len(ids) > 0 {
		shown := ids[:min(len(ids), maxUnscopedLogged)]
		logger.Warn("sandboxes without an instance label (made before instance scoping) are ignored by every server; "+
			"remove them with `docker rm -f sandbox-<id>` (and sandbox-egress-<id>)", "count", len(ids), "ids", shown)
	}
	logger.Info("instance scope", "instance_id", in.id, "explicit", in.explicit)
	return nil
}
