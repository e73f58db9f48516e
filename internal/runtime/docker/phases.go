package docker

import (
	"net/http"

	"github.com/docker/docker/client"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/opensandbox-go/opensandbox/internal/runtime"
)

// CountEngineRequests is a client option that counts every request the
// client sends in the runtime.Phases its context carries (see
// runtime.WithPhases), so that a create can report how many engine round
// trips it made. The engine client wraps its transport in otelhttp
// whatever the options; the filter sees each request before it is sent
// and lets all of them through.
func CountEngineRequests() client.Opt {
	return client.WithTraceOptions(otelhttp.WithFilter(func(r *http.Request) bool {
		runtime.PhasesFrom(r.Context()).EngineRequest()
		return true
	}))
}
