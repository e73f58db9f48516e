// Package server is the lifecycle API of the sandbox platform: the HTTP
// handlers that create, list, inspect, pause, resume, renew and delete
// sandboxes, resolve their endpoints, take snapshots and report
// diagnostics, plus API-key auth, request ids, expiry timers and the
// reverse proxy to ports inside sandboxes.
//
// It drives an internal/runtime.Runtime, which is the source of truth for
// sandboxes, and keeps what the runtime cannot hold (snapshot records,
// metadata and expiry overrides) in a Store. It serves a wire contract
// compatible with the OpenSandbox lifecycle API (api/lifecycle.yaml), with
// the JSON shapes of pkg/sandbox. Errors become {code, message} replies
// through internal/apierror only.
//
// The package imports no runtime driver (a test/lint rule keeps it so):
// quantities and label rules come from internal/grammar, which drivers
// share, and checks that depend on the engine's host are the driver's. It
// never imports the store implementation either: the program's main wires
// them together.
//
//	srv, err := server.New(server.Config{Runtime: rt, Store: st, APIKey: key})
//	if err != nil { ... }
//	go srv.Run(ctx) // expiry timers and snapshot workers
//	hs := server.NewHTTPServer(srv.Handler(), ":8080")
//	err = hs.ListenAndServe()
package server
