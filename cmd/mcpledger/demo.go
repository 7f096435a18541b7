package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// DemoCommand runs a short supervised session against embedded demo
// servers in a temporary journal, then prints what the journal recorded.
// The temporary directory (config, journal, timeline page) is removed at
// the end unless --keep keeps it.
type DemoCommand struct{ env *env }

// Run parses args and runs the demo.
func (c *DemoCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("demo", "[--for DURATION] [--keep]")
	dur := f.Duration("for", 9*time.Second, "how long to let the servers run")
	keep := f.Bool("keep", false, "keep the demo's directory (its config, journal and timeline page) and print how to explore it")
	if err := f.parse(args); err != nil {
		return err
	}
	w := &syncWriter{w: c.env.stderr} // the state printer writes too
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mcpledger-demo-")
	if err != nil {
		return err
	}
	if !*keep {
		// Deferred before the journal's Close, so it runs after it.
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				fmt.Fprintf(w, "demo: could not remove %s: %v\n", dir, err)
			}
		}()
	}
	cfgPath := filepath.Join(dir, "mcp.json")
	servers := map[string]any{}
	for _, k := range []string{"notes", "flaky", "slow"} {
		servers[k] = map[string]any{"command": exe, "args": []string{demoServerCmd, k}}
	}
	b, _ := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return err
	}
	jpath := filepath.Join(dir, "journal.db")
	j, err := store.Open(jpath, nil)
	if err != nil {
		return err
	}
	defer j.Close()

	fmt.Fprintf(w, "mcpledger demo: three MCP servers, each a copy of this binary:\n"+
		"  notes  healthy\n  flaky  exits every 3 s (watch it reconnect with backoff)\n  slow   takes 1.5 s to start\n"+
		"config %s\njournal %s\n\n", cfgPath, jpath)
	cf := configFlags{configs: []string{cfgPath}, workspace: dir, flagsOnly: true}
	opts, err := cf.options(c.env, "demo")
	if err != nil {
		return err
	}
	opts.PingInterval = 2 * time.Second
	opts.PingTimeout = time.Second
	m, err := rt.New(storeJournal{j}, opts)
	if err != nil {
		return err
	}
	startupDone, stopWatch := watchStates(m, w, false)
	rep, err := m.Start(ctx)
	startupDone()
	if err != nil {
		stopWatch()
		m.Close()
		return err
	}
	fmt.Fprintf(w, "\nStart returned after %s: ready %v, still connecting %v (their cached tools, if any, are offered as deferred)\n\n",
		rep.Elapsed.Round(time.Millisecond), rep.Ready, rep.Connecting)
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"mcp__notes__add_note", map[string]any{"text": "the journal is the only commit point"}},
		{"mcp__notes__list_notes", nil},
		{"mcp__slow__clock", nil},
	} {
		res, err := m.CallTool(ctx, call.tool, call.args)
		switch {
		case err != nil:
			fmt.Fprintf(w, "call %s: %v\n", call.tool, err)
		default:
			fmt.Fprintf(w, "call %s → ", call.tool)
			printResult(&env{stdout: w}, res)
		}
	}
	fmt.Fprintf(w, "\nletting the servers run for %s…\n", *dur)
	select {
	case <-time.After(*dur):
	case <-ctx.Done():
	}
	stopWatch()
	if err := m.Shutdown("demo finished"); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n── the session as the journal recorded it (mcpledger log --journal %s --session last) ──\n", jpath)
	n := 0
	if err := j.ReadSession(ctx, m.Session(), 1, func(e events.Event) error {
		n++
		fmt.Fprintln(c.env.stdout, formatEvent(e))
		return nil
	}); err != nil {
		return err
	}
	if !*keep {
		fmt.Fprintf(w, "\n%d events. The demo's directory is removed; mcpledger demo --keep keeps its journal and\n"+
			"timeline page to explore with log, replay, why and timeline.\n", n)
		return nil
	}
	// End with the session's timeline: a page people would rather read
	// than the log above.
	evs, err := replay.Session(ctx, j, m.Session())
	if err != nil {
		return err
	}
	html := filepath.Join(dir, "timeline.html")
	fh, err := os.OpenFile(html, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := replay.Timeline(fh, evs, &replay.TimelineOptions{Source: jpath}); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Close(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d events. The session's timeline: %s\nKept (--keep): %s; its journal is %s; try:\n"+
		"  mcpledger log --journal %s --server flaky\n"+
		"  mcpledger replay last --verify --journal %s\n"+
		"  mcpledger why mcp__flaky__echo --journal %s\n",
		n, html, dir, jpath, jpath, jpath, jpath)
	return nil
}
