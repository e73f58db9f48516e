package docker

import (
	"fmt"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/opensandbox-go/opensandbox/pkg/sandbox"
)

// status is a sandbox state derived from a container state.
type status struct {
	State, Reason, Message string
	At                     time.Time
}

// stateOf derives the sandbox state from an inspected container state.
func stateOf(s *container.State) status {
	if s == nil {
		return status{State: sandbox.StateFailed, Reason: "CONTAINER_UNKNOWN", Message: "the engine reported no state"}
	}
	started, finished := engineTime(s.StartedAt), engineTime(s.FinishedAt)
	switch {
	case s.Paused:
		return status{State: sandbox.StatePaused, Reason: "CONTAINER_PAUSED", At: started}
	case s.Restarting:
		return status{State: sandbox.StateRunning, Reason: "CONTAINER_RESTARTING", At: started}
	case s.Running:
		return status{State: sandbox.StateRunning, Reason: "CONTAINER_RUNNING", At: started}
	}
	switch s.Status {
	case container.StateCreated:
		return status{State: sandbox.StatePending, Reason: "CONTAINER_STARTING"}
	case container.StateRemoving:
		return status{State: sandbox.StateStopping, Reason: "CONTAINER_REMOVING", At: finished}
	case container.StateDead:
		return status{State: sandbox.StateFailed, Reason: "CONTAINER_DEAD", Message: exitMessage(s), At: finished}
	case container.StateExited:
		if s.ExitCode == 0 && !s.OOMKilled && s.Error == "" {
			return status{State: sandbox.StateTerminated, Reason: "CONTAINER_EXITED", Message: "exited with code 0", At: finished}
		}
		return status{State: sandbox.StateFailed, Reason: "CONTAINER_EXITED_ERROR", Message: exitMessage(s), At: finished}
	}
	return status{State: sandbox.StateFailed, Reason: "CONTAINER_UNKNOWN", Message: fmt.Sprintf("unknown container state %q", s.Status)}
}

func exitMessage(s *container.State) string {
	msg := fmt.Sprintf("exited with code %d", s.ExitCode)
	if s.OOMKilled {
		msg += " (out of memory)"
	}
	if s.Error != "" {
		msg += ": " + s.Error
	}
	return msg
}

// summaryState derives the state from ContainerList data alone; it is
// exact for every state but exited and dead, which need the exit code.
func summaryState(state container.ContainerState, created time.Time) (status, bool) {
	switch state {
	case container.StateRunning:
		return status{State: sandbox.StateRunning, Reason: "CONTAINER_RUNNING", At: created}, true
	case container.StatePaused:
		return status{State: sandbox.StatePaused, Reason: "CONTAINER_PAUSED", At: created}, true
	case container.StateRestarting:
		return status{State: sandbox.StateRunning, Reason: "CONTAINER_RESTARTING", At: created}, true
	case container.StateCreated:
		return status{State: sandbox.StatePending, Reason: "CONTAINER_STARTING", At: created}, true
	case container.StateRemoving:
		return status{State: sandbox.StateStopping, Reason: "CONTAINER_REMOVING", At: created}, true
	}
	return status{}, false
}

// engineTime parses an engine timestamp; the zero time for "0001-01-01..."
// and anything unparsable.
func engineTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}
