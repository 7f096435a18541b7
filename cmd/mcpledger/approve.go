package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
)

// ApproveCommand approves or rejects a gated (project) server's current
// config: through the running mcpledger if there is one, otherwise by
// journaling the decision in a session of its own.
type ApproveCommand struct {
	env      *env
	decision string // events.DecisionApprove or events.DecisionReject
}

// Run parses args and records the decision.
func (c *ApproveCommand) Run(ctx context.Context, args []string) error {
	verb := map[string]string{events.DecisionApprove: "approve", events.DecisionReject: "reject"}[c.decision]
	f := c.env.newCommandFlags(verb, "NAME [--workspace DIR] [--mcp-config FILE]...")
	var cf configFlags
	cf.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	name, err := f.oneArg("")
	if err != nil {
		return err
	}
	if name == "" {
		f.Usage()
		return usageErrorf("%s: name the server (mcpledger approvals lists them)", verb)
	}
	by := whoami()
	if cl := f.control(); cl != nil {
		if err := cl.Do(ctx, control.Request{Op: verb, Name: name, By: by}, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.env.stdout, "%s: %sd by %s (the running mcpledger acted on it)\n", name, verb, by)
		return nil
	}
	lc := cf.loader(c.env)()
	var cfg *events.ServerConfig
	for i := range lc.Observed.Servers {
		if lc.Observed.Servers[i].Name == name {
			cfg = &lc.Observed.Servers[i]
		}
	}
	switch {
	case cfg == nil && lc.Err() != nil:
		return &configError{err: lc.Err()}
	case cfg == nil:
		return fmt.Errorf("%s: no server %q in the config of workspace %s", verb, name, lc.Observed.Workspace)
	case !cfg.Gated:
		return fmt.Errorf("%s: %w (%q comes from %s)", verb, rt.ErrNotGated, name, cfg.Scope)
	}
	j, _, err := f.openWritable()
	if err != nil {
		return err
	}
	defer j.Close()
	if _, err := rt.RecordApproval(ctx, storeJournal{j.Journal}, lc.Observed.Workspace, *cfg, c.decision, by, buildID(),
		func() int64 { return time.Now().UnixNano() }); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stdout, "%s: %sd by %s at config hash %s (workspace %s)\n", name, verb, by, events.ShortHash(cfg.Hash), lc.Observed.Workspace)
	return nil
}

func whoami() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username + " (cli)"
	}
	return "cli"
}

// ApprovalsCommand lists the gated servers and their approval state.
type ApprovalsCommand struct{ env *env }

// Run parses args and lists the approvals.
func (c *ApprovalsCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("approvals", "[--json] [--workspace DIR] [--mcp-config FILE]...")
	var cf configFlags
	cf.register(f)
	asJSON := f.Bool("json", false, "print one JSON array")
	if err := f.parse(args); err != nil {
		return err
	}
	var rows []rt.ApprovalRow
	if cl := f.control(); cl != nil {
		if err := cl.Do(ctx, control.Request{Op: "approvals"}, &rows); err != nil {
			return err
		}
	} else {
		var err error
		if rows, err = c.offline(ctx, f, &cf); err != nil {
			return err
		}
	}
	if rows == nil {
		rows = []rt.ApprovalRow{}
	}
	if *asJSON {
		return json.NewEncoder(c.env.stdout).Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.env.stdout, "no gated servers (only a workspace's .mcp.json servers need approval)")
		return nil
	}
	for _, r := range rows {
		line := fmt.Sprintf("%-20s %-9s %s", r.Server, r.State, events.ShortHash(r.Hash))
		if r.Decision != "" {
			line += fmt.Sprintf("  last: %s by %s at %s for %s", r.Decision, r.By, time.Unix(0, r.At).UTC().Format(time.RFC3339), events.ShortHash(r.DecidedHash))
		}
		if len(r.Changed) > 0 {
			line += "  changed: " + strings.Join(r.Changed, ", ")
		}
		if len(r.Withheld) > 0 {
			line += "  withheld tools (definition changed): " + strings.Join(r.Withheld, ", ")
		}
		fmt.Fprintln(c.env.stdout, line)
	}
	return nil
}

// offline computes the rows from the config files and the journal's
// approval decisions, without a running mcpledger.
func (c *ApprovalsCommand) offline(ctx context.Context, f *commandFlags, cf *configFlags) ([]rt.ApprovalRow, error) {
	lc := cf.loader(c.env)()
	// Every decision up to now, including those recorded after the last
	// run (an offline approve).
	var approvals *projections.Approvals
	if j, err := f.openReadOnly(ctx); err == nil {
		h, err := c.env.history(ctx, j, 0)
		j.Close()
		if err != nil {
			return nil, err
		}
		approvals = h.Approvals
	} else if !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no journal at") {
		return nil, err
	}
	var rows []rt.ApprovalRow
	for _, s := range lc.Observed.Servers {
		if !s.Gated {
			continue
		}
		row := rt.ApprovalRow{Server: s.Name, Scope: s.Scope, Hash: s.Hash, State: "pending"}
		if approvals != nil {
			if d, ok := approvals.Lookup(lc.Observed.Workspace, s.Name); ok {
				row.DecidedHash, row.Decision, row.By, row.At = d.Hash, d.Decision, d.By, d.At
				switch {
				case d.Hash == s.Hash && d.Decision == events.DecisionApprove:
					row.State = "approved"
				case d.Hash == s.Hash:
					row.State = "rejected"
				case d.Config != nil:
					row.Changed = events.ChangedFields(d.Config, &s)
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
