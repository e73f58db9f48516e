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
	path    string
	log     *slog.Logger
	next    chan *policy.Policy
	onError func()         // counts failed writes; may be nil
	last    *policy.Policy // the last policy written; owned by run, then finish
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

// run writes each policy save hands over until ctx ends, and then the
// one still pending, if any: a policy accepted just before the end is
// not lost to a stop that came first.
func (w *persister) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			select {
			case p := <-w.next:
				w.write(p)
			default:
			}
			return
		case p := <-w.next:
			w.write(p)
		}
	}
}

// finish writes current unless it is what was written last, once run
// has returned and nothing saves any more (the sidecar's last act).
func (w *persister) finish(current *policy.Policy) {
	select {
	case p := <-w.next:
		w.write(p)
	default:
	}
	if current != w.last {
		w.write(current)
	}
}

func (w *persister) write(p *policy.Policy) {
	if err := writeFileAtomic(w.path, p); err != nil {
		w.log.Warn("persist egress policy", "path", w.path, "err", err)
		if w.onError != nil {
			w.onError()
		}
		return
	}
	w.last = p
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
