package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Phases records where the time of one operation goes: the steps a driver
// runs (each with its duration and the engine requests made during it) and
// the engine requests made in all. The server attaches one to the context
// of a create and reports it in the response's Server-Timing header, which
// is what the create benchmark prints. A nil *Phases records nothing, so
// drivers call its methods unconditionally.
type Phases struct {
	mu     sync.Mutex
	steps  []Phase
	engine int
	counts map[string]int
}

// Phase is one recorded step.
type Phase struct {
	Name string
	Dur  time.Duration
	// Engine is the number of engine requests made while it ran.
	Engine int
}

type phasesKey struct{}

// WithPhases returns ctx carrying a new, empty Phases.
func WithPhases(ctx context.Context) (context.Context, *Phases) {
	p := &Phases{}
	return context.WithValue(ctx, phasesKey{}, p), p
}

// PhasesFrom returns the Phases ctx carries, or nil.
func PhasesFrom(ctx context.Context) *Phases {
	p, _ := ctx.Value(phasesKey{}).(*Phases)
	return p
}

// Start begins step name; the returned func ends it (only its first call
// counts, so it can also be deferred for the error paths). Steps of one
// operation run one after the other.
func (p *Phases) Start(name string) func() {
	if p == nil {
		return func() {}
	}
	t0 := time.Now()
	p.mu.Lock()
	e0 := p.engine
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d := time.Since(t0)
			p.mu.Lock()
			p.steps = append(p.steps, Phase{Name: name, Dur: d, Engine: p.engine - e0})
			p.mu.Unlock()
		})
	}
}

// EngineRequest counts one request to the engine.
func (p *Phases) EngineRequest() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.engine++
	p.mu.Unlock()
}

// Count adds n to the counter name (e.g. readiness probes).
func (p *Phases) Count(name string, n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.counts == nil {
		p.counts = map[string]int{}
	}
	p.counts[name] += n
	p.mu.Unlock()
}

// Steps returns the recorded steps in the order they ended.
func (p *Phases) Steps() []Phase {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Phase(nil), p.steps...)
}

// EngineRequests is the number of engine requests counted.
func (p *Phases) EngineRequests() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.engine
}

// ServerTiming renders the steps as a Server-Timing header value
// (https://www.w3.org/TR/server-timing/): each step as
// name;dur=<ms>;desc="<n> engine", then "engine;desc=<n>" with the engine
// requests in all and one "<counter>;desc=<n>" per counter, e.g.
//
//	image;dur=2.1;desc="1 engine", start;dur=180.4;desc="1 engine", engine;desc=6
func (p *Phases) ServerTiming() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	parts := make([]string, 0, len(p.steps)+1+len(p.counts))
	for _, s := range p.steps {
		parts = append(parts, fmt.Sprintf("%s;dur=%.1f;desc=\"%d engine\"", s.Name, float64(s.Dur.Microseconds())/1000, s.Engine))
	}
	parts = append(parts, fmt.Sprintf("engine;desc=%d", p.engine))
	for _, name := range slices.Sorted(maps.Keys(p.counts)) {
		parts = append(parts, fmt.Sprintf("%s;desc=%d", name, p.counts[name]))
	}
	return strings.Join(parts, ", ")
}
