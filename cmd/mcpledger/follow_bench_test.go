package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
	"github.com/mcpledger/mcpledger/store"
	"github.com/mcpledger/mcpledger/store/storetest"
)

// writerFor opens a journal for writing and serves its reads on the
// control socket, as run and serve do (openWritable).
func writerFor(b *testing.B, path string) (*store.Journal, func()) {
	j, err := store.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := control.Serve(control.Path(path), control.Options{
		Reads: readsOf(j)})
	if err != nil {
		b.Fatal(err)
	}
	return j, func() {
		_ = srv.Close()
		_ = j.Close()
	}
}

// BenchmarkFollowers measures what `log --follow` readers cost the
// writer: durable appends (fsync on) of one event of about 200 bytes by 8
// producers, b.N events, with no follower and with ten, each a process of
// the built CLI running `log --follow --json` into a file of its own (as
// a log shipper would take it). After the appends it waits until every
// follower has written every event, so a follower that falls behind or
// drops one fails the benchmark. Read the ratio of the two rows'
// events/s, alternating with -count:
//
//	go test ./cmd/mcpledger -run '^$' -bench Followers -benchtime 20000x -count 5
//
// The third row is the floor: no follower, but as much CPU as the ten
// followers of the row before used per second of appends, burnt by two
// processes at the followers' priority (SCHED_IDLE) that never touch the
// journal. What it costs the writer is the cost of that CPU being in use
// on this machine, which no design of the followers can avoid short of
// doing less work per event.
func BenchmarkFollowers(b *testing.B) {
	bin := runtimetest.BuildMcpledger(b, b.TempDir())
	var followerCPU float64 // CPU seconds the followers used per second of appends
	b.Run("followers=0", func(b *testing.B) { benchFollowers(b, bin, 0, 8, 0) })
	b.Run("followers=10", func(b *testing.B) { followerCPU = benchFollowers(b, bin, 10, 8, 0) })
	b.Run("floor=idle-cpu", func(b *testing.B) { benchFollowers(b, bin, 0, 8, followerCPU) })
}

// TestBurnProcess is not a test: it is a CPU burner the followers
// benchmark runs in a child process, burning the fraction of a CPU in
// MCPLEDGER_TEST_BURN at SCHED_IDLE.
func TestBurnProcess(t *testing.T) {
	s := os.Getenv("MCPLEDGER_TEST_BURN")
	if s == "" {
		t.Skip("the followers benchmark's CPU burner")
	}
	frac, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	lowerPriority(followerNice)
	const period = 5 * time.Millisecond
	busy := time.Duration(frac * float64(period))
	for {
		t0 := time.Now()
		for time.Since(t0) < busy {
		}
		time.Sleep(period - busy)
	}
}

// benchFollowers runs the appends with followers following, or with burn
// CPUs burnt, and returns the CPU seconds the followers used per second
// of appends.
func benchFollowers(b *testing.B, bin string, followers, producers int, burn float64) float64 {
	if burn > 0 {
		for range 2 {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBurnProcess$")
			cmd.Env = append(os.Environ(), "MCPLEDGER_TEST_BURN="+strconv.FormatFloat(burn/2, 'f', 3, 64))
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}()
		}
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "journal.db")
	j, closeWriter := writerFor(b, path)
	defer closeWriter()
	// The followers' output goes to memory (tmpfs) where there is one: on
	// the journal's disk, 10 followers' 3 MB/s of writeback would slow its
	// fsyncs, which is the disk's cost, not the followers'.
	outDir := dir
	if d, err := os.MkdirTemp("/dev/shm", "followers"); err == nil {
		outDir = d
		defer os.RemoveAll(d)
	}
	outs := make([]string, followers)
	var procs []*exec.Cmd
	for i := range followers {
		outs[i] = filepath.Join(outDir, "follower-"+strconv.Itoa(i)+".jsonl")
		f, err := os.Create(outs[i])
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "log", "--follow", "--json", "--journal", path)
		cmd.Stdout = f
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		procs = append(procs, cmd)
	}
	var cpu time.Duration
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Signal(os.Interrupt)
			_ = p.Wait()
			cpu += p.ProcessState.UserTime() + p.ProcessState.SystemTime()
		}
		procs = nil
	}
	defer stop()
	// One event first, seen by every follower: they are all connected.
	ctx := context.Background()
	if _, err := j.Append(ctx, events.NewID(), store.Any, []events.Event{storetest.Event("first", 0, time.Now())}); err != nil {
		b.Fatal(err)
	}
	awaitLines(b, outs, 1)

	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range producers {
		sid := events.NewID()
		wg.Go(func() {
			for n := 0; left.Add(-1) >= 0; n++ {
				ev := []events.Event{storetest.Event("server-"+strconv.Itoa(i), n, time.Now())}
				if _, err := j.Append(ctx, sid, store.Any, ev); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	awaitLines(b, outs, b.N+1)
	stop()
	perSecond := cpu.Seconds() / elapsed.Seconds()
	if followers > 0 {
		b.ReportMetric(perSecond, "follower-cpus")
	}
	if burn > 0 {
		b.ReportMetric(burn, "burnt-cpus")
	}
	return perSecond
}

// awaitLines waits until each file holds n lines.
func awaitLines(b *testing.B, files []string, n int) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, f := range files {
		for {
			data, _ := os.ReadFile(f)
			got := bytes.Count(data, []byte("\n"))
			if got == n {
				break
			}
			if got > n || time.Now().After(deadline) {
				b.Fatalf("%s holds %d events, want %d", f, got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// BenchmarkFollowLatency measures how long an event takes from its append
// (its Time, taken before the commit, so the fsync counts) to its line on
// a `log --follow --json` process's stdout: through the writer's control
// socket (mode=writer, a run holding the journal), and from the file
// (mode=file: each event appended by a writer of its own that opens the
// journal, appends and closes it, as approve does; the follower sees the
// commit by polling the file). One event every 10ms; p50, p99 and max in
// ms, and the baseline they include: the append's own p50 (the writer's
// commit, and for mode=file its open and close too).
//
//	go test ./cmd/mcpledger -run '^$' -bench FollowLatency -benchtime 200x -count 3
func BenchmarkFollowLatency(b *testing.B) {
	bin := runtimetest.BuildMcpledger(b, b.TempDir())
	for _, mode := range []string{"writer", "file"} {
		b.Run("mode="+mode, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "journal.db")
			j, closeWriter := writerFor(b, path)
			if mode == "file" {
				closeWriter()
			} else {
				defer closeWriter()
			}
			cmd := exec.Command(bin, "log", "--follow", "--json", "--journal", path)
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(os.Interrupt)
				_ = cmd.Wait()
			}()
			arrived := make(chan time.Duration, b.N+1)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					var e struct {
						Time time.Time `json:"time"`
					}
					if json.Unmarshal(sc.Bytes(), &e) == nil {
						arrived <- time.Since(e.Time)
					}
				}
			}()
			sid := events.NewID()
			appendOne := func(n int) {
				w := j
				if mode == "file" {
					var err error
					if w, err = store.Open(path, nil); err != nil {
						b.Fatal(err)
					}
					defer w.Close()
				}
				if _, err := w.Append(context.Background(), sid, store.Any, []events.Event{storetest.Event("s", n, time.Now())}); err != nil {
					b.Fatal(err)
				}
			}
			appendOne(0) // the follower is connected once it prints this one
			select {
			case <-arrived:
			case <-time.After(30 * time.Second):
				b.Fatal("the follower printed nothing in 30s")
			}
			lat := make([]time.Duration, 0, b.N)
			own := make([]time.Duration, 0, b.N) // the append's own time: the baseline lat includes
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				appendOne(i + 1)
				own = append(own, time.Since(t0))
				select {
				case d := <-arrived:
					lat = append(lat, d)
				case <-time.After(30 * time.Second):
					b.Fatalf("event %d not printed in 30s", i+1)
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.StopTimer()
			slices.Sort(lat)
			slices.Sort(own)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(own[len(own)/2]), "append-p50-ms")
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
