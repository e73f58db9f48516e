package taskexecutor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// maxBody bounds a request body.
const maxBody = 4 << 20

// Error is the body of an error response.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Handler serves the executor's HTTP API (see the package comment).
func Handler(e *Executor, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	h := &handler{e: e, log: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /setTasks", h.setTasks)
	mux.HandleFunc("GET /getTasks", h.getTasks)
	mux.HandleFunc("POST /tasks", h.create)
	mux.HandleFunc("GET /tasks", h.getTasks)
	mux.HandleFunc("GET /tasks/{id}", h.get)
	mux.HandleFunc("DELETE /tasks/{id}", h.delete)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	return mux
}

type handler struct {
	e   *Executor
	log *slog.Logger
}

func (h *handler) setTasks(w http.ResponseWriter, r *http.Request) {
	var tasks []Task
	if !decode(w, r, &tasks) {
		return
	}
	if tasks == nil {
		tasks = []Task{}
	}
	out, err := h.e.Sync(tasks)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) getTasks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, h.e.List())
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	var t Task
	if !decode(w, r, &t) {
		return
	}
	out, err := h.e.Create(t)
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	t, err := h.e.Get(r.PathValue("id"))
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	if err := h.e.Delete(r.PathValue("id")); err != nil {
		h.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decode reads a JSON body into v, answering 400 when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		if _, rerr := dec.Token(); rerr != io.EOF {
			err = errors.New("trailing data after the JSON value")
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body: %v", err))
		return false
	}
	return true
}

func (h *handler) fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	default:
		h.log.Error("request failed", "error", err)
	}
	writeError(w, status, err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers {"code": <status text>, "message": msg}, the upstream
// executor's error shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, Error{Code: http.StatusText(status), Message: msg})
}
