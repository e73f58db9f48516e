// Package kubestore keeps the lifecycle core's records in a Kubernetes
// cluster, so that every server replica against the cluster shares them
// and a restart of all of them loses nothing. It implements
// lifecycle.Store:
//
//   - a sandbox's overrides (patched metadata, renewed expiry) live on its
//     BatchSandbox, as an annotation, and a renewed expiry is also written
//     to spec.expireTime, so the operator deletes the sandbox at the time
//     the last renew set, whichever replica served it;
//   - snapshot records and create-journal entries are ConfigMaps of the
//     namespace, one per record, labelled as ours.
//
// Writes go to the API server. Reads of BatchSandboxes may come from an
// informer cache (the runtime driver's): after each write the store waits
// until that cache has seen it, so a replica reads its own writes.
package kubestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opensandbox-go/opensandbox/internal/kubeerr"
	"github.com/opensandbox-go/opensandbox/internal/lifecycle"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
	sandboxv1alpha1 "github.com/opensandbox-go/opensandbox/pkg/apis/sandbox/v1alpha1"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

const (
	// AnnotationOverrides holds a sandbox's lifecycle.Overrides as JSON on
	// its BatchSandbox.
	AnnotationOverrides = "opensandbox.io/overrides"

	// LabelRecord marks the ConfigMaps of this store; its value says
	// which kind of record one is.
	LabelRecord = "opensandbox.io/record"
	// LabelOwner names the server replica that wrote a journal entry.
	LabelOwner = "opensandbox.io/record-owner"

	recordSnapshot = "snapshot"
	recordCreate   = "create"

	dataKey = "record.json"

	// DefaultAbandonAfter is how old another replica's create-journal
	// entry must be before this replica treats its create as abandoned.
	DefaultAbandonAfter = 15 * time.Minute

	// visibleTimeout bounds the wait for the cache to show a write.
	visibleTimeout = 10 * time.Second
)

// Options configure a Store.
type Options struct {
	// Client writes to the API server, and reads ConfigMaps (it should
	// not be a cached client: no informer on every ConfigMap is needed).
	Client client.Client
	// Reader reads BatchSandboxes; the runtime driver's cache, so that
	// serving a list of sandboxes costs no API call. nil means Client.
	Reader client.Reader
	// Namespace is the sandboxes' namespace.
	Namespace string
	// Owner identifies this server replica in the create journal (its pod
	// name, say). A replica treats the entries it owns and is not running
	// as never answered (the process that wrote them is gone) and those of
	// other owners as such only after AbandonAfter.
	Owner string
	// AbandonAfter: see Owner; 0 means DefaultAbandonAfter. It must exceed
	// the longest create.
	AbandonAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Store is a lifecycle.Store in a Kubernetes namespace.
type Store struct {
	c     client.Client
	r     client.Reader
	ns    string
	owner string
	stale time.Duration
	now   func() time.Time
}

var _ lifecycle.Store = (*Store)(nil)

// New returns a Store; it makes no API call.
func New(opts Options) (*Store, error) {
	if opts.Client == nil || opts.Namespace == "" || opts.Owner == "" {
		return nil, errors.New("kubestore: Client, Namespace and Owner are required")
	}
	s := &Store{c: opts.Client, r: opts.Reader, ns: opts.Namespace, owner: labelValue(opts.Owner),
		stale: opts.AbandonAfter, now: opts.Now}
	if s.r == nil {
		s.r = opts.Client
	}
	if s.stale <= 0 {
		s.stale = DefaultAbandonAfter
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// GetOverrides returns the overrides on sandboxID's BatchSandbox; the zero
// Overrides when it has none or does not exist (the runtime reports a
// missing sandbox).
func (s *Store) GetOverrides(ctx context.Context, sandboxID string) (lifecycle.Overrides, error) {
	var bs sandboxv1alpha1.BatchSandbox
	if err := s.r.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: sandboxID}, &bs); err != nil {
		if apierrors.IsNotFound(err) {
			return lifecycle.Overrides{}, nil
		}
		return lifecycle.Overrides{}, classify(fmt.Sprintf("read the overrides of sandbox %s", sandboxID), err)
	}
	return decodeOverrides(&bs)
}

func decodeOverrides(bs *sandboxv1alpha1.BatchSandbox) (lifecycle.Overrides, error) {
	var o lifecycle.Overrides
	raw, ok := bs.Annotations[AnnotationOverrides]
	if !ok {
		return o, nil
	}
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return lifecycle.Overrides{}, fmt.Errorf("decode the overrides of sandbox %s: %w", bs.Name, err)
	}
	return o, nil
}

// PutOverrides writes o onto sandboxID's BatchSandbox, and a renewed
// expiry into its spec.expireTime, in one conflict-checked update; it
// returns once the reader shows the update.
func (s *Store) PutOverrides(ctx context.Context, sandboxID string, o lifecycle.Overrides) error {
	return s.UpdateOverrides(ctx, sandboxID, func(cur *lifecycle.Overrides) error {
		*cur = o
		return nil
	})
}

// UpdateOverrides applies change to the overrides on sandboxID's
// BatchSandbox as read from the API server, and writes them (with a
// renewed expiry in spec.expireTime) in an update guarded by the
// resourceVersion read: another server's write in between is a conflict,
// on which it reads again and applies change again. It returns once the
// reader shows the update; an error of change is returned as it is.
func (s *Store) UpdateOverrides(ctx context.Context, sandboxID string, change func(*lifecycle.Overrides) error) error {
	var raw, written string
	var changeErr error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var bs sandboxv1alpha1.BatchSandbox
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: sandboxID}, &bs); err != nil {
			return err
		}
		o, err := decodeOverrides(&bs)
		if err != nil {
			return err
		}
		if changeErr = change(&o); changeErr != nil {
			return nil
		}
		b, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encode the overrides of sandbox %s: %w", sandboxID, err)
		}
		raw = string(b)
		if bs.Annotations == nil {
			bs.Annotations = map[string]string{}
		}
		bs.Annotations[AnnotationOverrides] = raw
		if o.ExpiresAt != nil {
			bs.Spec.ExpireTime = &metav1.Time{Time: *o.ExpiresAt}
		}
		if err := s.c.Update(ctx, &bs); err != nil {
			return err
		}
		written = bs.ResourceVersion
		return nil
	})
	switch {
	case changeErr != nil:
		return changeErr
	case err != nil:
		return classify(fmt.Sprintf("write the overrides of sandbox %s", sandboxID), err)
	}
	return s.awaitVisible(ctx, sandboxID, raw, written)
}

// awaitVisible waits until the reader shows sandboxID with the overrides
// annotation raw (or the object gone, or changed again since).
func (s *Store) awaitVisible(ctx context.Context, sandboxID, raw, rv string) error {
	if s.r == client.Reader(s.c) {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, visibleTimeout, true, func(ctx context.Context) (bool, error) {
		var bs sandboxv1alpha1.BatchSandbox
		err := s.r.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: sandboxID}, &bs)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return bs.Annotations[AnnotationOverrides] == raw || bs.ResourceVersion == rv, nil
	})
	if err != nil {
		return fmt.Errorf("sandbox %s: the cache did not show the new overrides: %w", sandboxID, runtime.Classify(runtime.ErrUnavailable, err))
	}
	return nil
}

// DeleteOverrides is a no-op: the overrides go with the BatchSandbox.
func (s *Store) DeleteOverrides(ctx context.Context, sandboxID string) error { return nil }

// PutSnapshot creates or replaces the record of snapshot snap.ID.
func (s *Store) PutSnapshot(ctx context.Context, snap sandbox.Snapshot) error {
	if snap.ID == "" {
		return fmt.Errorf("put snapshot: %w: empty id", runtime.ErrInvalid)
	}
	if err := s.putRecord(ctx, recordSnapshot, snap.ID, snap, nil); err != nil {
		return classify("put snapshot "+snap.ID, err)
	}
	return nil
}

// GetSnapshot returns the record of snapshot id; runtime.ErrNotFound when
// there is none.
func (s *Store) GetSnapshot(ctx context.Context, id string) (sandbox.Snapshot, error) {
	var snap sandbox.Snapshot
	var cm corev1.ConfigMap
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: recordName(recordSnapshot, id)}, &cm); err != nil {
		return snap, classify("get snapshot "+id, err)
	}
	if err := decodeRecord(&cm, &snap); err != nil {
		return snap, err
	}
	return snap, nil
}

// ListSnapshots returns every snapshot record, in no particular order.
func (s *Store) ListSnapshots(ctx context.Context) ([]sandbox.Snapshot, error) {
	var l corev1.ConfigMapList
	if err := s.c.List(ctx, &l, client.InNamespace(s.ns), client.MatchingLabels{LabelRecord: recordSnapshot}); err != nil {
		return nil, classify("list snapshots", err)
	}
	out := make([]sandbox.Snapshot, 0, len(l.Items))
	for i := range l.Items {
		var snap sandbox.Snapshot
		if err := decodeRecord(&l.Items[i], &snap); err != nil {
			return nil, err
		}
		out = append(out, snap)
	}
	return out, nil
}

// DeleteSnapshot removes the record of snapshot id; runtime.ErrNotFound
// when there is none.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	return classify("delete snapshot "+id, s.deleteRecord(ctx, recordSnapshot, id))
}

// pendingCreate is a create-journal entry.
type pendingCreate struct {
	StartedAt time.Time `json:"startedAt"`
	Owner     string    `json:"owner"`
}

// RecordCreate journals the create of sandboxID under this replica.
func (s *Store) RecordCreate(ctx context.Context, sandboxID string, at time.Time) error {
	if sandboxID == "" {
		return fmt.Errorf("record create: %w: empty sandbox id", runtime.ErrInvalid)
	}
	err := s.putRecord(ctx, recordCreate, sandboxID, pendingCreate{StartedAt: at.UTC(), Owner: s.owner},
		map[string]string{LabelOwner: s.owner})
	return classify("record the create of sandbox "+sandboxID, err)
}

// ClearCreate removes the journal entry of sandboxID; none is not an error.
func (s *Store) ClearCreate(ctx context.Context, sandboxID string) error {
	err := s.deleteRecord(ctx, recordCreate, sandboxID)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return classify("clear the create of sandbox "+sandboxID, err)
}

// PendingCreates returns the entries this replica may settle: its own
// (the lifecycle core skips those it is running) and other replicas'
// older than AbandonAfter, whose creates no live replica still runs.
func (s *Store) PendingCreates(ctx context.Context) (map[string]time.Time, error) {
	var l corev1.ConfigMapList
	if err := s.c.List(ctx, &l, client.InNamespace(s.ns), client.MatchingLabels{LabelRecord: recordCreate}); err != nil {
		return nil, classify("list pending creates", err)
	}
	out := map[string]time.Time{}
	now := s.now()
	for i := range l.Items {
		var p pendingCreate
		if err := decodeRecord(&l.Items[i], &p); err != nil {
			return nil, err
		}
		id := strings.TrimPrefix(l.Items[i].Name, recordName(recordCreate, ""))
		if p.Owner == s.owner || now.Sub(p.StartedAt) > s.stale {
			out[id] = p.StartedAt
		}
	}
	return out, nil
}

func recordName(kind, id string) string { return "osb-" + kind + "-" + id }

func (s *Store) putRecord(ctx context.Context, kind, id string, v any, labels map[string]string) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s record %s: %w", kind, id, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: recordName(kind, id),
		Labels: map[string]string{LabelRecord: kind}}}
	for k, v := range labels {
		cm.Labels[k] = v
	}
	cm.Data = map[string]string{dataKey: string(raw)}
	err = s.c.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur corev1.ConfigMap
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(cm), &cur); err != nil {
			return err
		}
		cur.Labels, cur.Data = cm.Labels, cm.Data
		return s.c.Update(ctx, &cur)
	})
}

func (s *Store) deleteRecord(ctx context.Context, kind, id string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: recordName(kind, id)}}
	return s.c.Delete(ctx, cm)
}

func decodeRecord(cm *corev1.ConfigMap, v any) error {
	if err := json.Unmarshal([]byte(cm.Data[dataKey]), v); err != nil {
		return fmt.Errorf("decode record %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// labelValue makes s a valid label value (owners are pod names, which
// already are, or host names).
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-_.")
	if len(out) > 63 {
		out = strings.Trim(out[:63], "-_.")
	}
	if out == "" {
		out = "server"
	}
	return out
}

// classify wraps err with what failed and the runtime class it belongs to.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	class := kubeerr.Class(err)
	if class == nil {
		// The store has no internal failures of its own to report: what
		// the API did not classify is the cluster being unavailable.
		class = runtime.ErrUnavailable
	}
	return fmt.Errorf("%s: %w", what, runtime.Classify(class, err))
}
