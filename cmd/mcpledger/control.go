package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcpledger/mcpledger/runtime/control"
)

// ControlCommand sends one command (reconnect, stop, refresh, reload) to
// the running mcpledger over its control socket.
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
	if c.op == "reconnect" {
		f.BoolVar(&failed, "failed", false, "reconnect every failed server")
	}
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := f.parse(args); err != nil {
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
		return fmt.Errorf("%s: no running mcpledger holds %s; start one with: mcpledger run", c.op, path)
	}
	if err := cl.Do(ctx, req, nil); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "%s %s: done\n", c.op, name)
	return nil
}
