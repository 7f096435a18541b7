package runtime_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// BenchmarkStartupHistory measures Manager.Start (no servers) on an empty
// journal and on one of 100 recorded sessions of 10,000 events over 90
// days (runtimetest.History; 10 sessions under -short), as `run` meets
// it: after an earlier run left its checkpoint. The full-fold rows hide
// the checkpoints (the journal as before them), as the baseline of the
// same run. start-ms is Start alone; the op also closes the session.
//
//	go test ./runtime -run '^$' -bench StartupHistory -benchtime 10x -count 5
func BenchmarkStartupHistory(b *testing.B) {
	sessions, size := 100, "1M"
	if testing.Short() {
		sessions, size = 10, "100k"
	}
	for _, c := range []struct {
		name     string
		sessions int
		full     bool
	}{
		{"events=0", 0, false},
		{"events=" + size, sessions, false},
		{"events=" + size + ",full-fold", sessions, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "journal.db")
			if c.sessions > 0 {
				path = runtimetest.History(b, c.sessions, 10_000)
			}
			j, err := store.Open(path, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			var journal runtime.Journal = storeJournal{J: j}
			// The run before: it folds the history and leaves a checkpoint.
			m, err := runtime.New(journal, &runtime.Options{PingInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			m.Close()
			if c.full {
				journal = plainJournal{journal}
			}
			var start time.Duration
			b.ResetTimer()
			for range b.N {
				m, err := runtime.New(journal, &runtime.Options{PingInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if _, err := m.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				start += time.Since(t0)
				if err := m.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(start.Microseconds())/1e3/float64(b.N), "start-ms")
		})
	}
}
