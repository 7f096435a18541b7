package runtime_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

var (
	stallRun      = flag.Bool("stall", false, "run TestServerStall (minutes)")
	stallDuration = flag.Duration("stall.duration", 5*time.Minute, "TestServerStall: how long rounds go on")
	stallPing     = flag.Duration("stall.ping", time.Second, "TestServerStall: the Manager's PingInterval (0: no pings; a stall is then dumped with GOTRACEBACK=crash and fails the test)")
)

// TestServerStall makes rounds of 16×500 concurrent echo calls to a fresh
// 2026-07-28 stdio test server (a go-sdk server built with this
// toolchain) and checks that every call returns, and within a bound the
// Manager's pings set: a Go 1.26/1.27 process can freeze in a garbage
// collection's stop-the-world while a goroutine enters a blocking read of
// stdin, until something is written to it (RELIABILITY.md, "A Go runtime
// hang"). A ping is such a write. With -stall.ping=0 there is none: a
// round with no progress for 10 s sends the server SIGQUIT, with
// GOTRACEBACK=crash set, and the test fails naming the file with every
// thread's stack.
func TestServerStall(t *testing.T) {
	if !*stallRun {
		t.Skip("the stall test runs with -stall (see RELIABILITY.md)")
	}
	dir := t.TempDir()
	srv := runtimetest.BuildServer(t)
	wrapper := filepath.Join(dir, "srv.sh") // the server's stderr, per process, to a file
	script := fmt.Sprintf("#!/bin/sh\nexec env GOTRACEBACK=crash %s 2>>%s/srv-$$.err\n", srv, dir)
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	ping := *stallPing
	if ping == 0 {
		ping = -1
	}
	var calls, slow int64
	var worst time.Duration
	end := time.Now().Add(*stallDuration)
	for round := 1; time.Now().Before(end); round++ {
		_, adapter := runtimetest.OpenJournal(t)
		c, s := runtimetest.Stdio("srv", wrapper, nil)
		m, err := runtime.New(adapter, &runtime.Options{Config: runtimetest.ConfigOf(c, s), Seed: 1, PingInterval: ping,
			Durability: runtime.Relaxed, TerminateGrace: 200 * time.Millisecond, ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		var done atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		var failed []error
		stop := make(chan struct{})
		watchdog := make(chan string, 1)
		go func() { // ends with the round
			last, at := int64(-1), time.Now()
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
				}
				if n := done.Load(); n != last {
					last, at = n, time.Now()
				} else if *stallPing == 0 && time.Since(at) > 10*time.Second {
					for _, p := range serverPIDs(srv) {
						syscall.Kill(p, syscall.SIGQUIT)
					}
					watchdog <- fmt.Sprintf("round %d: no call returned for 10 s after %d; SIGQUIT to the server; its stacks in %s/srv-PID.err", round, n, dir)
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() { // joined below
				defer wg.Done()
				for range 500 {
					t0 := time.Now()
					_, err := m.CallTool(ctx, "mcp__srv__echo", map[string]any{"message": "hello ledger"})
					d := time.Since(t0)
					mu.Lock()
					lat = append(lat, d)
					if err != nil {
						failed = append(failed, err)
					}
					mu.Unlock()
					if err != nil {
						return
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		close(stop)
		m.Close()
		cancel()
		select {
		case msg := <-watchdog:
			t.Fatal(msg)
		default:
		}
		if len(failed) > 0 {
			t.Fatalf("round %d: %d calls failed, the first: %v", round, len(failed), failed[0])
		}
		calls += int64(len(lat))
		for _, d := range lat {
			if d > 250*time.Millisecond { // at c=16 a call takes 5–25 ms
				slow++
			}
		}
		if w := slices.Max(lat); w > worst {
			worst = w
		}
	}
	t.Logf("%d calls; %d took over 250 ms (all of a round's 16 in flight, when a server stalled until a ping); the slowest %v", calls, slow, worst)
	if *stallPing > 0 && worst > *stallPing+5*time.Second {
		t.Errorf("the slowest call took %v: more than the ping interval (%v) + 5 s, so a ping did not end the stall", worst, *stallPing)
	}
}

// serverPIDs lists the live processes running bin.
func serverPIDs(bin string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(b), bin+"\x00") {
			var p int
			fmt.Sscan(e.Name(), &p)
			out = append(out, p)
		}
	}
	return out
}
