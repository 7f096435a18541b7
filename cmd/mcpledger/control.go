package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
)

// ControlCommand sends one command (reconnect, stop, refresh, reload) to
// the running mcpledger over its control socket. A reconnect of a named
// server while none runs is journaled in a session of its own: it clears
// the server's storm hold for the next run.
type ControlCommand struct {
	env *env
	op  string
}

// Run parses args and sends the command.
func (c *ControlCommand) Run(ctx context.Context, args []string) error {
	synopsis := "NAME"
	switch c.op {
	case "reload":
		synopsis = ""
	case "reconnect":
		synopsis = "NAME | --failed"
	}
	f := c.env.newCommandFlags(c.op, synopsis)
	failed := false
	var cf configFlags
	if c.op == "reconnect" {
		f.BoolVar(&failed, "failed", false, "reconnect every failed server")
		cf.register(f)
	}
	if err := f.Parse(args); err != nil {
		return err
	}
	name, err := f.oneArg("")
	if err != nil {
		return err
	}
	req := control.Request{Op: c.op, Name: name, By: "cli"}
	switch {
	case c.op == "reconnect" && failed:
		req.Op = "reconnect-failed"
	case c.op != "reload" && name == "":
		f.Usage()
		return usageErrorf("%s: name the server (mcpledger status lists them)", c.op)
	}
	cl := f.control()
	if cl == nil {
		path, _, _ := f.journalPath()
		switch req.Op {
		case "reconnect":
			return c.offlineReconnect(ctx, f, &cf, name)
		case "reconnect-failed":
			return fmt.Errorf("reconnect --failed: no running mcpledger holds %s; start one with: mcpledger run, "+
				"or clear one server's storm hold for the next run with: mcpledger reconnect NAME", path)
		}
		return fmt.Errorf("%s: no running mcpledger holds %s; start one with: mcpledger run", c.op, path)
	}
	if err := cl.Do(ctx, req, nil); err != nil {
		return err
	}
	fmt.Fprintln(c.env.stdout, strings.TrimSpace(c.op+" "+name)+": done")
	return nil
}

// offlineReconnect journals a reconnect of name, a server of the
// workspace's config, while no mcpledger holds the journal.
func (c *ControlCommand) offlineReconnect(ctx context.Context, f *commandFlags, cf *configFlags, name string) error {
	lc := cf.loader(c.env)()
	found := false
	for _, s := range lc.Observed.Servers {
		found = found || s.Name == name
	}
	if !found {
		return fmt.Errorf("reconnect: no server %q in the config of workspace %s", name, lc.Observed.Workspace)
	}
	j, path, err := f.openWritable()
	if err != nil {
		return err
	}
	defer j.Close()
	by := whoami()
	if _, err := rt.RecordReconnect(ctx, storeJournal{j.Journal}, name, by, buildID(), func() int64 { return time.Now().UnixNano() }); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "reconnect %s: recorded by %s in %s (no mcpledger was running); the next run launches it, "+
		"counting none of its crashes before now against the storm breaker\n", name, by, path)
	return nil
}
