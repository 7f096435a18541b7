package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	f := c.env.newCommandFlags("status", "[--json]")
	asJSON := f.Bool("json", false, `print {"session","servers":[…]}`)
	if err := f.parse(args); err != nil {
		return err
	}
	var res control.StatusResult
	live := false
	if cl := f.control(); cl != nil {
		if err := cl.Do(ctx, control.Request{Op: "status"}, &res); err != nil {
			return err
		}
		live = true
	} else {
		set, err := c.env.foldLast(ctx, f)
		if err != nil {
			return err
		}
		v := set.Status.View()
		res = control.StatusResult{Session: v.Session, Servers: v.Servers}
	}
	if res.Servers == nil {
		res.Servers = []projections.ServerStatus{}
	}
	if *asJSON {
		return json.NewEncoder(c.env.stdout).Encode(res)
	}
	where := "no mcpledger is running: the last session in the journal, as it stood when it began to shut down"
	if live {
		where = "running"
	}
	fmt.Fprintf(c.env.stdout, "session %s (%s)\n", res.Session, where)
	printStatus(c.env.stdout, res.Servers, time.Now())
	return nil
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
}

// Run parses args and prints the catalog.
func (c *ToolsCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("tools", "[--json]")
	asJSON := f.Bool("json", false, `print [{"name","server","tool","description","deferred"}]`)
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
		set, err := c.env.foldLast(ctx, f)
		if err != nil {
			return err
		}
		v := set.Catalog.View()
		entries, unavailable = v.Tools, v.Unavailable
	}
	rows := make([]toolRow, 0, len(entries))
	for _, e := range entries {
		rows = append(rows, toolRow{Name: e.Name, Server: e.Server, Tool: e.Tool, Description: e.Description, Deferred: e.Deferred})
	}
	if *asJSON {
		return json.NewEncoder(c.env.stdout).Encode(rows)
	}
	for _, r := range rows {
		mark := ""
		if r.Deferred {
			mark = " (deferred: server still connecting)"
		}
		fmt.Fprintf(c.env.stdout, "%-48s %s%s\n", r.Name, firstLine(r.Description), mark)
	}
	for _, u := range unavailable {
		fmt.Fprintf(c.env.stdout, "unavailable: %s is %s (%s) %s\n", u.Server, u.State, dash(string(u.Reason)), rt.Recovery(u.Server, u.Reason, u.State))
	}
	if len(rows) == 0 && len(unavailable) == 0 {
		fmt.Fprintln(c.env.stdout, "no tools")
	}
	return nil
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

// foldLast folds the journal into the projections, so Status and Catalog
// describe its last session as it stood when its shutdown began (after
// it, every server is stopped and the catalog empty, which tells a
// post-mortem nothing). What came before the last session comes from the
// newest checkpoint below it and the events after that.
func (e *env) foldLast(ctx context.Context, f *commandFlags) (*projections.Set, error) {
	j, err := f.openReadOnly()
	if err != nil {
		return nil, err
	}
	defer j.Close()
	sessions, err := j.Sessions(ctx)
	if err != nil || len(sessions) == 0 {
		return projections.NewSet(), err
	}
	last := sessions[len(sessions)-1]
	h, err := e.history(ctx, j, last.FirstGPos)
	if err != nil {
		return nil, err
	}
	set := projections.NewSetFrom(h)
	stopping := false
	err = j.ReadAll(ctx, last.FirstGPos, func(e events.Event) error {
		if e.Session == last.Session {
			if p, ok := e.Payload.(*events.StopRequested); ok && e.Server == "" && p.Reason == events.ReasonShutdown {
				stopping = true
			}
			if stopping {
				return nil
			}
		}
		set.Apply(e)
		return nil
	})
	return set, err
}

var _ = store.ErrLocked
