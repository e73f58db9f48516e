// Package lifecycle is the transport-neutral core of the sandbox
// platform: it creates sandboxes (ids, tokens, expiry), deletes, renews
// and patches them, keeps their overrides, takes snapshots, and runs the
// expiry timers and the runtime's sweeps. It drives an
// internal/runtime.Runtime and keeps what the runtime cannot hold in a
// Store.
//
// It knows no transport: failures are errors of the runtime's classes
// (runtime.ErrNotFound, ErrInvalid, ErrConflict, ErrUnavailable, ...),
// some of them an *Error whose Kind names the lifecycle rule that failed
// (ErrNotRenewable, ErrSnapshotBusy, ...). A front end (internal/server
// speaks the OpenSandbox HTTP API) decodes requests, calls a Service and
// maps those classes to its own statuses. It imports no runtime driver.
//
//	svc, err := lifecycle.New(lifecycle.Config{Runtime: rt, Store: st})
//	go svc.Run(ctx) // expiry, sweeps, snapshot workers
//	sb, err := svc.Create(ctx, spec, 10*time.Minute)
package lifecycle
