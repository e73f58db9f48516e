package server

import (
	"fmt"
	"net/http"
	"unicode"

	"github.com/opensandbox-go/opensandbox/internal/apierror"
	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// maxSnapshotName bounds the optional snapshot name.
const maxSnapshotName = 253

// subjectSnapshot names a snapshot in error messages.
func subjectSnapshot(id string) string { return fmt.Sprintf("snapshot %q", id) }

// createSnapshot records a snapshot in state Creating and captures it in
// the background; the reply does not wait for the capture.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var req sandbox.CreateSnapshotRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Name) > maxSnapshotName {
		s.writeError(w, r, badRequest("name is longer than %d characters", maxSnapshotName))
		return
	}
	for _, c := range req.Name {
		if unicode.IsControl(c) {
			s.writeError(w, r, badRequest("name must not contain control characters"))
			return
		}
	}
	id := sandboxID(r)
	snap, err := s.lc.CreateSnapshot(r.Context(), id, req.Name)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, sandboxCodes, subjectSandbox(id)))
		return
	}
	apierror.WriteJSON(w, http.StatusAccepted, snap)
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("snapshotId")
	snap, err := s.lc.GetSnapshot(r.Context(), id)
	if err != nil {
		s.writeError(w, r, fromRuntime(err, snapshotCodes, subjectSnapshot(id)))
		return
	}
	apierror.WriteJSON(w, http.StatusOK, snap)
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := parsePage(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	states := parseStates(q)
	sandboxFilter, _ := single(q, "sandboxId")
	all, err := s.lc.ListSnapshots(r.Context())
	if err != nil {
		s.writeError(w, r, fromRuntime(err, classCodes{}, ""))
		return
	}
	items := make([]sandbox.Snapshot, 0, len(all))
	for _, snap := range all {
		if sandboxFilter != "" && snap.SandboxID != sandboxFilter {
			continue
		}
		if !states.match(snap.Status.State) {
			continue
		}
		items = append(items, snap)
	}
	sortNewestFirst(items, func(v sandbox.Snapshot) (string, int64) { return v.ID, v.CreatedAt.UnixNano() })
	pageItems, info := paginate(items, page)
	apierror.WriteJSON(w, http.StatusOK, sandbox.ListSnapshotsResponse{Items: pageItems, Pagination: info})
}

// deleteSnapshot removes a snapshot that is not being captured (see
// lifecycle.Service.DeleteSnapshot).
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("snapshotId")
	if err := s.lc.DeleteSnapshot(r.Context(), id); err != nil {
		s.writeError(w, r, fromRuntime(err, snapshotCodes, subjectSnapshot(id)))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
