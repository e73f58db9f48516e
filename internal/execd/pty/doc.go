// Package pty serves execd's interactive terminal sessions: POST /pty
// registers a session, GET /pty/{sessionId}/ws attaches one WebSocket
// client to it, GET /pty/{sessionId} reports its state and DELETE
// /pty/{sessionId} kills it.
//
// A session's process starts when the first client attaches, either on a
// pseudo-terminal (the default) or on plain pipes (query pty=0, stderr kept
// separate). The process runs in its own session and process group with the
// environment of procenv.Builder. Everything it prints is counted from
// offset 0 and the most recent Options.ReplayBytes are kept, so a client
// that drops off can come back with since=<offset> and receive what it
// missed before live output resumes. The process outlives its clients;
// only its own exit, Delete or Manager.Close ends it.
//
// When the process exits the attached client receives an exit frame and a
// normal close. The session then stays registered, reported as not running,
// so its output can still be replayed and its exit code read by attaching
// again; Delete forgets it.
//
// Wiring, with the routes upstream clients expect:
//
//	m := pty.New(pty.Options{Env: procenv.Builder{EnvFile: envFile}, Logger: log})
//	mux.HandleFunc("POST /pty", m.Create)
//	mux.HandleFunc("GET /pty/{sessionId}", m.Status)
//	mux.HandleFunc("DELETE /pty/{sessionId}", m.Delete)
//	mux.HandleFunc("GET /pty/{sessionId}/ws", m.Attach)
//	defer m.Close(ctx)
//
// The package owns its processes and goroutines and imports nothing from
// sibling execd packages other than procenv.
package pty
