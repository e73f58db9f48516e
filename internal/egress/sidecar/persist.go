package sidecar

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/opensandbox-go/opensandbox/internal/egress/policy"
)

// persister writes the current policy to a file off the store's lock: the
// store calls save under its write lock, so save only hands over the
// newest policy and run does the I/O.
type persister struct {
	path string
	log  *slog.Logger
	next chan *policy.Policy
}

func newPersister(path string, log *slog.Logger) *persister {
	return &persister{path: path, log: log, next: make(chan *policy.Policy, 1)}
}

func (w *persister) save(p *policy.Policy) {
	for {
		select {
		case w.next <- p:
			return
		default:
			select { // drop the stale pending policy, keep the newest
			case <-w.next:
			default:
			}
		}
	}
}

func (w *persister) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-w.next:
			if err := writeFileAtomic(w.path, p); err != nil {
				w.log.Warn("persist egress policy", "path", w.path, "err", err)
			}
		}
	}
}

func writeFileAtomic(path string, p *policy.Policy) error {
	b, err := json.Marshal(p.Wire())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".policy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
