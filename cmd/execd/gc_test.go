package main

import (
	"runtime/debug"
	"testing"
)

// execd collects at gcPercent unless GOGC is set, which wins.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	tuneGC(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("without GOGC the GC percentage is %d, want %d", got, gcPercent)
	}
	tuneGC(func(k string) (string, bool) { return "100", k == "GOGC" })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set execd changed the GC percentage to %d", got)
	}
}
