package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
)

// RunCommand supervises the configured servers in the foreground until
// interrupted (or, with --once, until every server settles).
type RunCommand struct{ env *env }

// Run parses args and runs the session.
func (c *RunCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("run", "[--once] [--watch=true] [--retain DURATION] [--mcp-config FILE]... [--workspace DIR] [--allowed-servers a,b]")
	var cf configFlags
	cf.register(f)
	once := f.Bool("once", false, "settle every server, print status, stop; exit 1 if any server ended failed or is invalid, 5 if none can run")
	watch := f.Bool("watch", true, "reload when a config file changes (debounced 300 ms; only changed servers restart)")
	retain := f.String("retain", "", "first archive sessions that ended more than `DURATION` ago (e.g. 30d), beside the journal")
	otlpEndpoint := f.String("otlp-endpoint", "", otlpEndpointUsage)
	otlpProtocol := f.String("otlp-protocol", "", otlpProtocolUsage)
	if err := f.parse(args); err != nil {
		return err
	}
	var age time.Duration
	if *retain != "" {
		var err error
		if age, err = parseAge(*retain); err != nil {
			return usageErrorf("run: --retain %s", err)
		}
	}
	// The state printer and this goroutine both write to stderr.
	tty := isTerminal(c.env.stderr)
	c.env.stderr = &syncWriter{w: c.env.stderr}
	opts, err := cf.options(c.env, "run") // a config that cannot be used stops here
	if err != nil {
		return err
	}
	if *retain != "" {
		if err := c.retain(ctx, f, age); err != nil {
			return err
		}
	}
	j, path, err := f.openWritable()
	if err != nil {
		return err
	}
	defer j.Close()
	export := startLiveExport(ctx, c.env, j.Journal, *otlpEndpoint, *otlpProtocol)
	defer export.Close() // after Shutdown: ships the session's last events
	opts.Watch = *watch
	m, err := rt.New(storeJournal{j.Journal}, opts)
	if err != nil {
		return err
	}
	// status, tools, call and the rest reach it over the control socket,
	// from the moment its session is open (not after the startup gate).
	j.SetManager(m)
	startupDone, stopWatch := watchStates(m, c.env.stderr, tty)
	rep, err := m.Start(ctx)
	startupDone()
	if err != nil {
		stopWatch()
		m.Close()
		return err
	}
	if !*once {
		keepOn := "mcpledger keeps running: it reloads when a config file changes, and on `mcpledger reload`"
		if !*watch {
			keepOn = "mcpledger keeps running: `mcpledger reload` reads the config again"
		}
		v := m.Snapshot()
		reportIdle(c.env.stderr, v.Status, cf.files, keepOn, v.Config.Workspace)
	}
	fmt.Fprintf(c.env.stderr, "session %s: %d ready, %d connecting, %d failed, %d stopped (%s); journal %s\n",
		m.Session(), len(rep.Ready), len(rep.Connecting), len(rep.Failed), len(rep.Stopped), rep.Elapsed.Round(time.Millisecond), path)
	if *once {
		settle(ctx, m)
		stopWatch()
		rows := m.Status()
		printStatus(c.env.stdout, c.env.styleFor(c.env.stdout), rows, time.Now(), "STATE")
		verdict := onceVerdict(rows, cf.files)
		ws := m.Snapshot().Config.Workspace
		if _, none := verdict.(*nothingToRunError); !none && idleReason(rows, cf.files) != "" {
			fmt.Fprintln(c.env.stderr, idleReason(rows, cf.files))
			printHeld(c.env.stderr, rows, ws)
		}
		printNextStep(c.env.stderr, rows, ws)
		if err := m.Shutdown("run --once"); err != nil {
			return err
		}
		return verdict
	}
	<-ctx.Done()
	stopWatch()
	fmt.Fprintln(c.env.stderr, "stopping: every server is being shut down")
	return m.Shutdown("signal")
}

// syncWriter serializes writes from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// settle waits until every server is ready, failed or stopped.
func settle(ctx context.Context, m *rt.Manager) {
	views, cancel := m.Subscribe()
	defer cancel()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case v := <-views:
			done := true
			for _, s := range v.Status {
				if s.State != events.StateReady && s.State != events.StateFailed && s.State != events.StateStopped {
					done = false
				}
			}
			if done {
				return
			}
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watchStates prints every server state change to w as it happens, says
// when a server starts waiting for an approval, and prints what each
// config reading skips (printConfigReport). On a terminal, until
// startupDone is called, it keeps one live line per server (state and
// elapsed time) redrawn in place instead. stop ends it and waits.
func watchStates(m *rt.Manager, w io.Writer, tty bool) (startupDone, stop func()) {
	views, cancel := m.Subscribe()
	done := make(chan struct{})
	quit := make(chan struct{})
	started := make(chan struct{})
	redrawn := make(chan struct{}) // closed once the live block is final
	var startOnce sync.Once
	go func() { // owned: stop() ends it and waits
		defer close(done)
		last := map[string]projections.ServerStatus{}
		var cfg configReporter
		settledAt := map[string]time.Duration{}
		promptable := map[string]bool{}
		shownErr := map[string]string{} // the error last printed, by server
		t0 := time.Now()
		var v *rt.View
		drawn := 0
		live := tty
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		redraw := func() {
			if v == nil {
				return
			}
			if drawn > 0 {
				fmt.Fprintf(w, "\x1b[%dA", drawn)
			}
			for _, s := range v.Status {
				el, ok := settledAt[s.Name]
				if !ok {
					el = time.Since(t0)
				}
				line := fmt.Sprintf("%-16s %-12s %7s", s.Name, s.State, el.Round(10*time.Millisecond))
				if s.Reason != "" {
					line += " (" + string(s.Reason) + ")"
				}
				fmt.Fprintf(w, "\x1b[2K%s\n", line)
			}
			drawn = len(v.Status)
		}
		for {
			select {
			case v = <-views:
			case <-tick.C:
				if live {
					redraw()
				}
				continue
			case <-started:
				started = nil
				if live {
					redraw()
					live = false
				}
				cfg.report(w, m.Snapshot()) // before what Start's caller prints
				close(redrawn)
				continue
			case <-quit:
				cfg.report(w, m.Snapshot())
				return
			}
			if cfg.report(w, v) > 0 {
				drawn = 0 // the live block starts again below
			}
			for _, s := range v.Status {
				p, seen := last[s.Name]
				if seen && p.State == s.State && p.Attempt == s.Attempt {
					continue
				}
				last[s.Name] = s
				if s.State == events.StateReady || s.State == events.StateFailed || s.State == events.StateStopped {
					settledAt[s.Name] = time.Since(t0)
				} else {
					delete(settledAt, s.Name)
				}
				if live {
					continue
				}
				line := fmt.Sprintf("%7s  %-16s %-12s", time.Since(t0).Round(time.Millisecond), s.Name, s.State)
				if s.Attempt > 1 {
					line += fmt.Sprintf(" attempt %d", s.Attempt)
				}
				if s.Reason != "" {
					line += " (" + string(s.Reason) + ")"
				}
				if s.State == events.StateReady {
					line += fmt.Sprintf(" %d tools", s.Tools)
				}
				// An error once per server until it changes (a crash loop
				// repeats the same one), and on the line that ends in failed.
				if s.Error != "" && s.State != events.StateReady && (s.Error != shownErr[s.Name] || s.State == events.StateFailed) {
					line += "  " + s.Error
					shownErr[s.Name] = s.Error
				}
				fmt.Fprintln(w, strings.TrimRight(line, " "))
			}
			if live {
				redraw()
			}
			now := map[string]bool{}
			for _, name := range v.Promptable() {
				now[name] = true
				if !promptable[name] {
					fmt.Fprintf(w, "%s awaits approval of its config: mcpledger approve %s (or reject %s)\n", name, name, name)
					drawn = 0
				}
			}
			promptable = now
		}
	}()
	return func() {
			startOnce.Do(func() {
				close(started)
				select { // the final live block is drawn before anything else prints
				case <-redrawn:
				case <-done:
				}
			})
		}, func() {
			cancel()
			close(quit)
			<-done
		}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// retain archives, before the session starts, what ended more than age
// ago. An archive that fails leaves the journal as it was: the run goes
// on, and says why.
func (c *RunCommand) retain(ctx context.Context, f *commandFlags, age time.Duration) error {
	path, _, err := f.journalPath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return nil // a new journal: nothing to archive
	}
	rep, err := c.env.archive(ctx, path, "", time.Now().Add(-age))
	switch {
	case err != nil:
		fmt.Fprintf(c.env.stderr, "warning: --retain: %v (the journal is unchanged)\n", err)
	case rep.Archive != "":
		fmt.Fprintln(c.env.stderr, rep.summary())
	}
	return nil
}
