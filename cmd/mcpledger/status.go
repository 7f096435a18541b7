package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/store"
)

// StatusCommand prints each server's state: from the running mcpledger if
// there is one, otherwise as the journal's last session left it.
type StatusCommand struct{ env *env }

// Run parses args and prints the status.
func (c *StatusCommand) Run(ctx context.Context, args []string) error {
	if namedServer(args) { // status NAME: one server, as get NAME
		return (&GetCommand{env: c.env}).Run(ctx, args)
	}
	f := c.env.newCommandFlags("status", "[--cursor FILE] [--json]")
	asJSON := f.Bool("json", false, `print {"session","servers":[…]}`)
	cursorFile := f.String("cursor", "", "also show how far a mcpledger ship --cursor `FILE` is behind the journal")
	if err := f.parse(args); err != nil {
		return err
	}
	res := statusResult{Running: true}
	if cl := f.control(); cl != nil {
		if err := cl.Do(ctx, control.Request{Op: "status"}, &res.StatusResult); err != nil {
			return err
		}
	} else {
		last, err := c.env.foldLast(ctx, f)
		if err != nil {
			return err
		}
		v := last.set.Status.View()
		res = statusResult{StatusResult: control.StatusResult{Session: v.Session, Servers: v.Servers, Config: last.set.Config.View()}}
		if last.info.LastTime != 0 {
			res.LastEvent = time.Unix(0, last.info.LastTime).UTC().Format(time.RFC3339Nano)
		}
		if last.stopped {
			res.Ended, res.Reason = res.LastEvent, string(last.reason)
		}
	}
	if res.Servers == nil {
		res.Servers = []projections.ServerStatus{}
	}
	res.Export = c.env.statusExportLag(ctx, f)
	if *cursorFile != "" {
		var err error
		if res.ExportFile, err = c.env.statusFileExportLag(ctx, f, *cursorFile); err != nil {
			return err
		}
	}
	if *asJSON {
		return writeJSON(c.env.stdout, res, false)
	}
	now := time.Now()
	switch {
	case res.Running && res.Starting:
		fmt.Fprintf(c.env.stdout, "session %s (starting: its servers are not launched yet)\n", res.Session)
		return nil
	case res.Running:
		fmt.Fprintf(c.env.stdout, "session %s (running)\n", res.Session)
		printJournalHealth(c.env.stdout, res.Journal, now)
		printExportLag(c.env.stdout, now, res.Export, res.ExportFile)
		printStatus(c.env.stdout, c.env.styleFor(c.env.stdout), res.Servers, now, "STATE")
		printConfigSection(c.env.stdout, res.Config)
		printNextStep(c.env.stdout, res.Servers, res.Config.Workspace)
		return nil
	case res.Session == "":
		fmt.Fprintln(c.env.stdout, "no mcpledger is running, and the journal has no session yet")
		return nil
	case res.Ended != "":
		end, _ := time.Parse(time.RFC3339Nano, res.Ended)
		fmt.Fprintf(c.env.stdout, "session %s ended %s (%s ago, %s); no mcpledger is running\n",
			res.Session, formatTime(end.UnixNano()), now.Sub(end).Round(time.Second), dash(res.Reason))
	default:
		at, _ := time.Parse(time.RFC3339Nano, res.LastEvent)
		fmt.Fprintf(c.env.stdout, "session %s did not stop: its process was killed or crashed after its last event, %s (%s ago); no mcpledger is running\n",
			res.Session, formatTime(at.UnixNano()), now.Sub(at).Round(time.Second))
	}
	printExportLag(c.env.stdout, now, res.Export, res.ExportFile)
	fmt.Fprintln(c.env.stdout, "its servers as they stood when it began to end:")
	printStatus(c.env.stdout, c.env.styleFor(c.env.stdout), res.Servers, now, "AT THE END")
	printConfigSection(c.env.stdout, res.Config)
	printNextStep(c.env.stdout, res.Servers, res.Config.Workspace)
	return nil
}

// printConfigSection writes what the session's latest config reading
// could not use, if anything: file errors, then skipped entries.
func printConfigSection(w io.Writer, v projections.ConfigView) {
	if len(v.Errors) > 0 {
		fmt.Fprintln(w, "config errors:")
		for _, e := range v.Errors {
			fmt.Fprintln(w, " ", e)
		}
	}
	if len(v.Skipped) > 0 {
		fmt.Fprintln(w, "config entries skipped:")
		for _, s := range v.Skipped {
			fmt.Fprintln(w, " ", strings.TrimPrefix(skippedLine(s), "skipped "))
		}
	}
}

// statusResult is the `status --json` shape: the session, whether an
// mcpledger is running it, and when it is not, when it ended and why.
type statusResult struct {
	control.StatusResult
	Running bool `json:"running"`
	// LastEvent is the time of the session's last event (RFC 3339), for a
	// session no process runs.
	LastEvent string `json:"last_event,omitempty"`
	// Ended is when the session stopped (its session.stopped), Reason
	// why; both empty for one that never stopped (killed, crashed).
	Ended  string `json:"ended,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Export is how far the journal's OTLP export is behind, when it
	// has one (exportlag.go).
	Export *exportLag `json:"export,omitempty"`
	// ExportFile is how far the export of a ship --cursor FILE is
	// behind, for status --cursor FILE.
	ExportFile *exportLag `json:"export_file,omitempty"`
}

// ToolsCommand prints the tool catalog.
type ToolsCommand struct{ env *env }

// toolRow is the `tools --json` shape.
type toolRow struct {
	Name        string `json:"name"`
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	Description string `json:"description"`
	Deferred    bool   `json:"deferred"`
	// InputSchema and OutputSchema are the tool's JSON Schemas as the
	// server listed them (an output schema only if it has one).
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Run parses args and prints the catalog.
func (c *ToolsCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("tools", "[--server NAME]... [--json]")
	asJSON := f.Bool("json", false, `print [{"name","server","tool","description","deferred","input_schema","output_schema"}]`)
	only := f.StringSlice("server", nil, "list only the tools of server `NAME` (repeat it, or give a comma list)")
	if err := f.parse(args); err != nil {
		return err
	}
	var entries []projections.Entry
	var unavailable []projections.UnavailableServer
	if cl := f.control(); cl != nil {
		if err := cl.Do(ctx, control.Request{Op: "tools"}, &entries); err != nil {
			return err
		}
	} else {
		last, err := c.env.foldLast(ctx, f)
		if err != nil {
			return err
		}
		v := last.set.Catalog.View()
		entries, unavailable = v.Tools, v.Unavailable
	}
	keep := func(server string) bool { return len(*only) == 0 || slices.Contains(*only, server) }
	rows := make([]toolRow, 0, len(entries))
	for _, e := range entries {
		if keep(e.Server) {
			rows = append(rows, toolRow{Name: e.Name, Server: e.Server, Tool: e.Tool, Description: e.Description, Deferred: e.Deferred,
				InputSchema: schema(e.InputSchema), OutputSchema: schema(e.OutputSchema)})
		}
	}
	if *asJSON {
		return writeJSON(c.env.stdout, rows, false)
	}
	if len(rows) > 0 {
		t := newTable([]string{"TOOL", "DESCRIPTION"})
		for _, r := range rows {
			desc := firstLine(r.Description)
			if r.Deferred {
				desc += " (deferred: server still connecting)"
			}
			t.add(r.Name, desc)
		}
		t.write(c.env.stdout)
	}
	shown := 0
	for _, u := range unavailable {
		if keep(u.Server) {
			shown++
			fmt.Fprintf(c.env.stdout, "unavailable: %s is %s (%s) %s\n", u.Server, u.State, dash(string(u.Reason)), rt.Recovery(u.Server, u.Reason, u.State))
		}
	}
	if len(rows) == 0 && shown == 0 {
		if len(*only) > 0 {
			fmt.Fprintf(c.env.stdout, "no tools of %s\n", strings.Join(*only, ", "))
		} else {
			fmt.Fprintln(c.env.stdout, "no tools")
		}
	}
	return nil
}

// schema is a catalog entry's schema text as raw JSON, nil for none.
func schema(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// lastFold is the journal's last agent session, folded.
type lastFold struct {
	set     *projections.Set
	info    store.SessionInfo // zero when the journal has no session
	stopped bool              // it recorded session.stopped, for reason
	reason  events.Reason
}

// foldLast folds the journal into the projections, so Status and Catalog
// describe its last session that supervised servers (not an approve or a
// one-shot call made since: lastSession) as it stood when its shutdown
// began (after it, every server is stopped and the catalog empty, which
// tells a post-mortem nothing). What came before that session comes from
// the newest checkpoint below it and the events after that.
func (e *env) foldLast(ctx context.Context, f *commandFlags) (lastFold, error) {
	out := lastFold{set: projections.NewSet()}
	j, err := f.openReadOnly(ctx)
	if err != nil {
		return out, err
	}
	defer j.Close()
	sessions, err := j.Sessions(ctx)
	if err != nil || len(sessions) == 0 {
		return out, err
	}
	last, err := lastSession(ctx, j, sessions)
	if err != nil {
		return out, err
	}
	out.info = last
	h, err := e.history(ctx, j, last.FirstGPos)
	if err != nil {
		return out, err
	}
	out.set = projections.NewSetFrom(h)
	stopping := false
	err = j.ReadAll(ctx, last.FirstGPos, func(e events.Event) error {
		if e.Session == last.Session {
			switch p := e.Payload.(type) {
			case *events.StopRequested:
				if e.Server == "" && p.Reason == events.ReasonShutdown {
					stopping = true
				}
			case *events.SessionStopped:
				out.stopped, out.reason = true, p.Reason
			}
			if stopping {
				return nil
			}
		} else if e.GPos > last.LastGPos {
			return errStopFold // sessions after it (an approve, a call) are not its state
		}
		out.set.Apply(e)
		return nil
	})
	if errors.Is(err, errStopFold) {
		err = nil
	}
	return out, err
}

var errStopFold = errors.New("fold done")

// printJournalHealth says, when the running mcpledger's journal refuses
// appends, since when, why and what happens next.
func printJournalHealth(w io.Writer, h *rt.JournalHealth, now time.Time) {
	if h == nil || !h.Degraded {
		return
	}
	fmt.Fprintf(w, "DEGRADED: the journal refuses appends since %s (%s ago): %s\n", formatTime(h.Since.UnixNano()), now.Sub(h.Since).Round(time.Second), h.Error)
	if h.Final {
		fmt.Fprintln(w, "  a failed commit may have reached the file: this process cannot resume; restart mcpledger, then run mcpledger verify")
	} else {
		fmt.Fprintf(w, "  calls and commands are refused; %d retries so far, the next in %s; it resumes by itself once it can write (free disk space)\n",
			h.Attempts, max(h.NextRetry.Sub(now), 0).Round(time.Millisecond))
	}
	if h.Backlog > 0 || h.Dropped > 0 {
		fmt.Fprintf(w, "  %d observations wait for the journal", h.Backlog)
		if h.Dropped > 0 {
			fmt.Fprintf(w, ", %d dropped past the bound", h.Dropped)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "the servers below are as last journaled:")
}
