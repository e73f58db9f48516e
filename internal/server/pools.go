package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// The /pools routes manage warm pools on runtimes that have them
// (runtime.Pools: the Kubernetes runtime, on the operator's Pool resource).
// On any other runtime every route answers 501 POOL_NOT_SUPPORTED.

// poolCodes are the codes of the pool routes.
var poolCodes = classCodes{
	notFound: apierror.CodePoolNotFound,
	conflict: apierror.CodePoolAlreadyExists,
	other:    apierror.CodePoolAPIError,
	// The engine's message (an apiserver refusal, say) is what the
	// operator managing pools needs.
	showOther: true,
}

// poolCapacityBody is a capacitySpec as sent: every field is required.
type poolCapacityBody struct {
	BufferMax *int32 `json:"bufferMax"`
	BufferMin *int32 `json:"bufferMin"`
	PoolMax   *int32 `json:"poolMax"`
	PoolMin   *int32 `json:"poolMin"`
}

// capacity checks that every field is present and returns the capacity.
func (b *poolCapacityBody) capacity() (runtime.PoolCapacity, error) {
	if b == nil {
		return runtime.PoolCapacity{}, badRequest("capacitySpec is required (bufferMax, bufferMin, poolMax, poolMin)")
	}
	for _, f := range []struct {
		name string
		v    *int32
	}{{"bufferMax", b.BufferMax}, {"bufferMin", b.BufferMin}, {"poolMax", b.PoolMax}, {"poolMin", b.PoolMin}} {
		if f.v == nil {
			return runtime.PoolCapacity{}, badRequest("capacitySpec.%s is required", f.name)
		}
	}
	return runtime.PoolCapacity{BufferMax: *b.BufferMax, BufferMin: *b.BufferMin, PoolMax: *b.PoolMax, PoolMin: *b.PoolMin}, nil
}

// createPoolRequest is the body of POST /pools.
type createPoolRequest struct {
	Name         string            `json:"name"`
	Template     json.RawMessage   `json:"template"`
	CapacitySpec *poolCapacityBody `json:"capacitySpec"`
}

// updatePoolRequest is the body of PUT /pools/{poolName}.
type updatePoolRequest struct {
	CapacitySpec *poolCapacityBody `json:"capacitySpec"`
}

// poolCapacity is a capacitySpec in replies.
type poolCapacity struct {
	BufferMax int32 `json:"bufferMax"`
	BufferMin int32 `json:"bufferMin"`
	PoolMax   int32 `json:"poolMax"`
	PoolMin   int32 `json:"poolMin"`
}

// poolStatus is a pool's observed state in replies.
type poolStatus struct {
	Total     int32  `json:"total"`
	Allocated int32  `json:"allocated"`
	Available int32  `json:"available"`
	Revision  string `json:"revision,omitempty"`
}

// poolResponse is a pool in replies.
type poolResponse struct {
	Name         string          `json:"name"`
	Template     json.RawMessage `json:"template,omitempty"`
	CapacitySpec poolCapacity    `json:"capacitySpec"`
	Status       poolStatus      `json:"status"`
	CreatedAt    time.Time       `json:"createdAt"`
}

// listPoolsResponse is the reply of GET /pools.
type listPoolsResponse struct {
	Items []poolResponse `json:"items"`
}

func toPoolResponse(p runtime.Pool) poolResponse {
	c := p.CapacitySpec
	return poolResponse{
		Name:         p.Name,
		Template:     p.Template,
		CapacitySpec: poolCapacity{BufferMax: c.BufferMax, BufferMin: c.BufferMin, PoolMax: c.PoolMax, PoolMin: c.PoolMin},
		Status: poolStatus{
			Total: p.Status.Total, Allocated: p.Status.Allocated, Available: p.Status.Available, Revision: p.Status.Revision,
		},
		CreatedAt: p.CreatedAt.UTC(),
	}
}

// poolsOf is the runtime's pool manager, or the 501 that says there is none.
func (s *Server) poolsOf() (runtime.Pools, *apierror.Error) {
	if p, ok := s.rt.(runtime.Pools); ok {
		return p, nil
	}
	return nil, poolsNotSupported("pool management needs the kubernetes runtime ([runtime] type = \"kubernetes\"); this server's runtime has no pools")
}

// withPools serves h with the runtime's pool manager, or answers the 501
// that says there is none.
func (s *Server) withPools(h func(http.ResponseWriter, *http.Request, runtime.Pools)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pools, ae := s.poolsOf()
		if ae != nil {
			s.writeError(w, r, ae)
			return
		}
		h(w, r, pools)
	}
}

func poolsNotSupported(format string, args ...any) *apierror.Error {
	return apierror.New(http.StatusNotImplemented, apierror.CodePoolNotSupported, format, args...)
}

// fromPoolError is fromRuntime for the pool routes: a runtime that has
// pools but cannot serve them now (the cluster lacks the CRD) is 501 too.
func fromPoolError(err error, name string) *apierror.Error {
	if errors.Is(err, runtime.ErrNotSupported) {
		var ae *apierror.Error
		if errors.As(err, &ae) {
			return ae
		}
		return &apierror.Error{Status: http.StatusNotImplemented, Code: apierror.CodePoolNotSupported, Message: err.Error(), Cause: err}
	}
	subject := ""
	if name != "" {
		subject = fmt.Sprintf("pool %q", name)
	}
	return fromRuntime(err, poolCodes, subject)
}

func (s *Server) createPool(w http.ResponseWriter, r *http.Request, pools runtime.Pools) {
	var req createPoolRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(req.Name) == "" {
		s.writeError(w, r, badRequest("name is required"))
		return
	}
	if t := bytes.TrimSpace(req.Template); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		s.writeError(w, r, badRequest("template is required (a pod template with at least one container)"))
		return
	}
	capacity, err := req.CapacitySpec.capacity()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := pools.CreatePool(r.Context(), runtime.Pool{Name: req.Name, Template: req.Template, CapacitySpec: capacity})
	if err != nil {
		s.writeError(w, r, fromPoolError(err, req.Name))
		return
	}
	apierror.WriteJSON(w, http.StatusCreated, toPoolResponse(p))
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request, pools runtime.Pools) {
	all, err := pools.ListPools(r.Context())
	if err != nil {
		s.writeError(w, r, fromPoolError(err, ""))
		return
	}
	slices.SortFunc(all, func(a, b runtime.Pool) int { return strings.Compare(a.Name, b.Name) })
	out := listPoolsResponse{Items: make([]poolResponse, 0, len(all))}
	for _, p := range all {
		out.Items = append(out.Items, toPoolResponse(p))
	}
	apierror.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request, pools runtime.Pools) {
	name := r.PathValue("poolName")
	p, err := pools.GetPool(r.Context(), name)
	if err != nil {
		s.writeError(w, r, fromPoolError(err, name))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, toPoolResponse(p))
}

func (s *Server) updatePool(w http.ResponseWriter, r *http.Request, pools runtime.Pools) {
	var req updatePoolRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	capacity, err := req.CapacitySpec.capacity()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name := r.PathValue("poolName")
	p, err := pools.UpdatePoolCapacity(r.Context(), name, capacity)
	if err != nil {
		s.writeError(w, r, fromPoolError(err, name))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, toPoolResponse(p))
}

func (s *Server) deletePool(w http.ResponseWriter, r *http.Request, pools runtime.Pools) {
	name := r.PathValue("poolName")
	if err := pools.DeletePool(r.Context(), name); err != nil {
		s.writeError(w, r, fromPoolError(err, name))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
