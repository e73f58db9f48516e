package runtime

import (
	"context"
	"regexp"
	"testing"
)

func TestPhasesServerTiming(t *testing.T) {
	ctx, p := WithPhases(context.Background())
	if PhasesFrom(ctx) != p {
		t.Fatal("PhasesFrom does not return the attached Phases")
	}
	end := p.Start("image")
	p.EngineRequest()
	end()
	end() // a second end records nothing
	end = p.Start("start")
	p.EngineRequest()
	p.EngineRequest()
	end()
	p.Count("execd-pings", 2)
	p.Count("execd-pings", 1)
	got := p.ServerTiming()
	want := regexp.MustCompile(`^image;dur=[0-9]+\.[0-9];desc="1 engine", start;dur=[0-9]+\.[0-9];desc="2 engine", engine;desc=3, execd-pings;desc=3$`)
	if !want.MatchString(got) {
		t.Fatalf("ServerTiming = %q, want it to match %s", got, want)
	}
	if n := len(p.Steps()); n != 2 {
		t.Fatalf("%d steps recorded, want 2", n)
	}
}

func TestNilPhasesRecordsNothing(t *testing.T) {
	p := PhasesFrom(context.Background())
	if p != nil {
		t.Fatal("a context without Phases gave one")
	}
	p.Start("x")()
	p.EngineRequest()
	p.Count("c", 1)
	if p.ServerTiming() != "" || p.EngineRequests() != 0 || p.Steps() != nil {
		t.Fatal("a nil Phases recorded something")
	}
}
