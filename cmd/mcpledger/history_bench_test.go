package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
)

// BenchmarkReadCommandsHistory runs the built CLI's read commands as a
// user would, each a process of its own, on a journal of 100 recorded
// sessions of 10,000 events (runtimetest.History; 10 sessions under
// -short) after a run left its checkpoint; the full-fold rows run them on
// the same journal without checkpoints (the journal as before them), as
// the baseline of the same run; the beside-writer rows with a writer
// holding the journal and serving its reads, as run does. Metrics per command: wall-ms and
// maxrss-MB, the median of the command's peak resident set as
// /usr/bin/time's %M reports it (the rusage Go's exec returns is not the
// command's own: a child started by vfork inherits the parent's peak,
// here the hundreds of MB the benchmark read to prime the journal).
//
//	go test ./cmd/mcpledger -run '^$' -bench ReadCommandsHistory -benchtime 5x -count 3
func BenchmarkReadCommandsHistory(b *testing.B) {
	sessions, size := 100, "1M"
	if testing.Short() {
		sessions, size = 10, "100k"
	}
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("needs /usr/bin/time (Debian package time) to measure each command's peak RSS")
	}
	bin := runtimetest.BuildMcpledger(b, b.TempDir())
	withCP := runtimetest.History(b, sessions, 10_000)
	prime(b, withCP)
	full := filepath.Join(b.TempDir(), "journal.db")
	copyJournal(b, full, withCP)
	dropCheckpoints(b, full)
	commands := [][]string{
		{"status"},
		{"approvals"},
		{"sessions"},
		{"why", "mcp__crashy__echo"},
		{"replay", "last"},
	}
	for _, journal := range []struct {
		name, path string
		writer     bool
	}{{"checkpoints", withCP, false}, {"checkpoints,beside-writer", withCP, true}, {"full-fold", full, false}} {
		closeWriter := func() {}
		if journal.writer { // held as run holds it: the commands read through its control socket
			_, closeWriter = writerFor(b, journal.path)
		}
		for _, args := range commands {
			b.Run("events="+size+","+journal.name+"/"+args[0], func(b *testing.B) {
				var wall time.Duration
				var rss []int64
				rssFile := filepath.Join(b.TempDir(), "rss")
				for range b.N {
					cmd := exec.Command(timeBin, append([]string{"-f", "%M", "-o", rssFile, bin}, append(slices.Clone(args), "--journal", journal.path)...)...)
					cmd.Env = append(os.Environ(), "HOME="+b.TempDir(), "XDG_CONFIG_HOME="+b.TempDir())
					cmd.Dir = b.TempDir()
					t0 := time.Now()
					out, err := cmd.CombinedOutput()
					wall += time.Since(t0)
					if err != nil {
						b.Fatalf("%v: %v\n%s", args, err, out)
					}
					kb, err := os.ReadFile(rssFile)
					if err != nil {
						b.Fatal(err)
					}
					n, err := strconv.ParseInt(strings.TrimSpace(string(kb)), 10, 64)
					if err != nil {
						b.Fatalf("/usr/bin/time wrote %q", kb)
					}
					rss = append(rss, n)
				}
				slices.Sort(rss)
				b.ReportMetric(float64(wall.Microseconds())/1e3/float64(b.N), "wall-ms")
				b.ReportMetric(float64(rss[len(rss)/2])/1024, "maxrss-MB")
			})
		}
		closeWriter()
	}
}

// prime runs one session on the journal at path, as `run --once` would:
// it folds the history and leaves a checkpoint.
func prime(b *testing.B, path string) {
	j, err := store.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	m, err := runtime.New(storeJournal{j}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
}

func copyJournal(b *testing.B, dst, src string) {
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		b.Fatal(err)
	}
}

func dropCheckpoints(b *testing.B, path string) {
	j, err := store.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	if err := j.DropCheckpoints(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkArchiveHistory runs `mcpledger archive --older-than 30d` on a
// fresh copy of the history journal (100 sessions of 10,000 events over
// 90 days; 10 under -short) each op, after a run left its checkpoint.
// Metrics: archive-s (the command's wall time), events/s archived,
// live-% (the live file's size after, as a share of before) and
// maxrss-MB.
//
//	go test ./cmd/mcpledger -run '^$' -bench ArchiveHistory -benchtime 3x
func BenchmarkArchiveHistory(b *testing.B) {
	sessions, size := 100, "1M"
	if testing.Short() {
		sessions, size = 10, "100k"
	}
	timeBin, err := exec.LookPath("/usr/bin/time")
	if err != nil {
		b.Skip("needs /usr/bin/time (Debian package time) to measure the command's peak RSS")
	}
	bin := runtimetest.BuildMcpledger(b, b.TempDir())
	src := runtimetest.History(b, sessions, 10_000)
	prime(b, src)
	b.Run("events="+size, func(b *testing.B) {
		var wall time.Duration
		var rate, share float64
		var rss []int64
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			path := filepath.Join(dir, "journal.db")
			copyJournal(b, path, src)
			before := sizeOf(path)
			rssFile := filepath.Join(dir, "rss")
			cmd := exec.Command(timeBin, "-f", "%M", "-o", rssFile, bin, "archive", "--older-than", "30d", "--json", "--journal", path)
			b.StartTimer()
			t0 := time.Now()
			out, err := cmd.Output()
			wall += time.Since(t0)
			if err != nil {
				b.Fatalf("archive: %v\n%s", err, out)
			}
			var rep archiveReport
			if err := json.Unmarshal(out, &rep); err != nil || rep.Archive == "" {
				b.Fatalf("archive printed %s (%v)", out, err)
			}
			rate += rep.EventsPerS
			share += 100 * float64(sizeOf(path)) / float64(before)
			kb, _ := os.ReadFile(rssFile)
			n, _ := strconv.ParseInt(strings.TrimSpace(string(kb)), 10, 64)
			rss = append(rss, n)
		}
		slices.Sort(rss)
		b.ReportMetric(wall.Seconds()/float64(b.N), "archive-s")
		b.ReportMetric(rate/float64(b.N), "events/s")
		b.ReportMetric(share/float64(b.N), "live-%")
		b.ReportMetric(float64(rss[len(rss)/2])/1024, "maxrss-MB")
	})
}
