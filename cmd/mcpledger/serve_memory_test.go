package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// memSample reads one runtime metric.
func memSample(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// garbageSink keeps the compiler from eliding the allocations.
var garbageSink []byte

// TestMemoryReleaserCountsGarbage: garbage no collection has found yet
// counts as heap objects, not as free memory; the releaser returns it all
// the same (a check of free memory alone saw nothing to return), once per
// releaseSlack allocated, not at every idle.
func TestMemoryReleaserCountsGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	debug.SetMemoryLimit(1 << 62)
	r := &memoryReleaser{}
	debug.FreeOSMemory()
	r.floor = heapHeld()

	for range 48 {
		garbageSink = make([]byte, 1<<20)
	}
	garbageSink = nil
	free := memSample("/memory/classes/heap/free:bytes") + memSample("/memory/classes/heap/unused:bytes")
	held := heapHeld()
	t.Logf("48 MiB of garbage: heap held %.1f MiB above the floor, free and unused %.1f MiB",
		float64(held-r.floor)/(1<<20), float64(free)/(1<<20))
	if held < r.floor+40<<20 {
		t.Fatalf("heap held %d bytes above the floor after 48 MiB of garbage (want it counted)", held-r.floor)
	}

	forced := memSample("/gc/cycles/forced:gc-cycles")
	released := memSample("/memory/classes/heap/released:bytes")
	r.release()
	if n := memSample("/gc/cycles/forced:gc-cycles"); n != forced+1 {
		t.Fatalf("%d forced collections (want 1)", n-forced)
	}
	if got := memSample("/memory/classes/heap/released:bytes") - released; got < 40<<20 {
		t.Errorf("released %.1f MiB (want the garbage's 48)", float64(got)/(1<<20))
	}
	if r.floor > held-40<<20 {
		t.Errorf("floor %d after the release, held %d before", r.floor, held)
	}

	// Idle again with nothing new: no collection.
	for range 4 {
		garbageSink = make([]byte, 1<<20)
	}
	garbageSink = nil
	r.release()
	if n := memSample("/gc/cycles/forced:gc-cycles"); n != forced+1 {
		t.Errorf("a release after 4 MiB of garbage collected (%d forced in all, want 1)", n-forced)
	}
	runtime.KeepAlive(garbageSink)
}
