package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// TestPlainCallConcurrent: many calls in flight at once on one stdio
// session each get their own answer, on the plain call in 2025-11-25 and
// in 2026-07-28 (with the _meta of that version).
func TestPlainCallConcurrent(t *testing.T) {
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) { testConcurrentCalls(t, v) })
	}
}

func testConcurrentCalls(t *testing.T, version string) {
	bin := runtimetest.BuildServer(t)
	_, adapter := openJournal(t)
	c, s := stdio("s", bin, nil)
	o := fastOpts(configOf(c, s))
	o.ProtocolVersion = version
	o.Durability = runtime.Relaxed
	m := startCalls(t, adapter, o, false)
	const workers, each = 16, 400
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				msg := fmt.Sprintf("w%d-%d", w, i)
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				r, err := m.CallTool(ctx, "mcp__s__echo", map[string]any{"message": msg})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("call %s: %w", msg, err)
					return
				}
				if got := textOf(t, r); got != msg {
					errs <- fmt.Errorf("call %s answered %q", msg, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
