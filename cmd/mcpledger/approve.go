package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
)

// ApproveCommand approves or rejects gated (project) servers' current
// configs: through the running mcpledger if there is one, otherwise by
// journaling the decisions in a session of its own. `approve --trust`
// also trusts the workspace (its stdio servers need both); --all decides
// every server waiting for a decision.
type ApproveCommand struct {
	env      *env
	decision string // events.DecisionApprove or events.DecisionReject
}

// Run parses args and records the decisions.
func (c *ApproveCommand) Run(ctx context.Context, args []string) error {
	verb := map[string]string{events.DecisionApprove: "approve", events.DecisionReject: "reject"}[c.decision]
	synopsis := "NAME... | --all [--workspace DIR] [--mcp-config FILE]..."
	if c.decision == events.DecisionApprove {
		synopsis = "NAME... | --all [--trust] [--workspace DIR] [--mcp-config FILE]..."
	}
	f := c.env.newCommandFlags(verb, synopsis)
	var cf configFlags
	cf.register(f)
	all := f.Bool("all", false, "every gated server whose current config waits for a decision")
	trust := new(bool)
	if c.decision == events.DecisionApprove {
		trust = f.Bool("trust", false, "also trust the workspace (mcpledger trust DIR): a stdio server of its .mcp.json needs both")
	}
	names, err := parseNames(f, args)
	if err != nil {
		return err
	}
	switch {
	case len(names) == 0 && !*all:
		f.Usage()
		return usageErrorf("%s: name the servers, or give --all (mcpledger approvals lists them)", verb)
	case len(names) > 0 && *all:
		return usageErrorf("%s: give server names or --all, not both", verb)
	}
	by := whoami()
	if cl := f.control(); cl != nil {
		return c.running(ctx, cl, verb, names, *all, *trust, by)
	}
	lc := cf.loader(c.env)()
	ws := lc.Observed.Workspace
	if *all {
		rows, err := (&ApprovalsCommand{env: c.env}).offline(ctx, f, &cf)
		if err != nil {
			return err
		}
		names = pendingNames(rows)
	}
	var cfgs []events.ServerConfig
	for _, name := range names {
		i := slices.IndexFunc(lc.Observed.Servers, func(s events.ServerConfig) bool { return s.Name == name })
		switch {
		case i < 0 && lc.Err() != nil:
			return &configError{err: lc.Err()}
		case i < 0:
			return fmt.Errorf("%s: no server %q in the config of workspace %s (nothing was recorded)", verb, name, ws)
		case !lc.Observed.Servers[i].Gated:
			return fmt.Errorf("%s: %w (%q comes from %s; nothing was recorded)", verb, rt.ErrNotGated, name, lc.Observed.Servers[i].Scope)
		}
		cfgs = append(cfgs, lc.Observed.Servers[i])
	}
	if len(cfgs) > 0 {
		j, _, err := f.openWritable()
		if err != nil {
			return err
		}
		defer j.Close()
		for _, cfg := range cfgs {
			if _, err := rt.RecordApproval(ctx, storeJournal{j.Journal}, ws, cfg, c.decision, by, buildID(),
				func() int64 { return time.Now().UnixNano() }); err != nil {
				return err
			}
			fmt.Fprintf(c.env.stdout, "%s: %s by %s at config hash %s (workspace %s)\n", cfg.Name, pastTense(verb), by, events.ShortHash(cfg.Hash), ws)
		}
	} else {
		fmt.Fprintf(c.env.stdout, "no server of workspace %s waits for a decision\n", ws)
	}
	if *trust {
		return c.trust(ws)
	}
	if c.decision == events.DecisionApprove && !lc.Observed.Trusted {
		var untrusted []string
		for _, cfg := range cfgs {
			if cfg.Transport == events.TransportStdio && cfg.Scope == events.ScopeProject {
				untrusted = append(untrusted, cfg.Name)
			}
		}
		c.trustNeeded(ws, untrusted)
	}
	return nil
}

// running records the decisions through the running mcpledger; with
// trust, it then trusts its workspace and has it read the config again.
func (c *ApproveCommand) running(ctx context.Context, cl *control.Client, verb string, names []string, all, trust bool, by string) error {
	var st control.StatusResult
	if err := cl.Do(ctx, control.Request{Op: "status"}, &st); err != nil {
		return err
	}
	var rows []rt.ApprovalRow
	if err := cl.Do(ctx, control.Request{Op: "approvals"}, &rows); err != nil {
		return err
	}
	if all {
		names = pendingNames(rows)
		if len(names) == 0 {
			fmt.Fprintln(c.env.stdout, "no server waits for a decision (the running mcpledger's config)")
		}
	}
	for _, name := range names { // all or nothing
		if !slices.ContainsFunc(rows, func(r rt.ApprovalRow) bool { return r.Server == name }) {
			return fmt.Errorf("%s: the running mcpledger has no gated server %q: only project (.mcp.json) servers need a decision (mcpledger approvals lists them; nothing was recorded)", verb, name)
		}
	}
	for _, name := range names {
		if err := cl.Do(ctx, control.Request{Op: verb, Name: name, By: by}, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.env.stdout, "%s: %s by %s (the running mcpledger acted on it)\n", name, pastTense(verb), by)
	}
	ws := st.Config.Workspace
	if trust {
		if err := c.trust(ws); err != nil {
			return err
		}
		// Without waiting for its watcher (or with --watch=false).
		return cl.Do(ctx, control.Request{Op: "reload"}, nil)
	}
	if verb == "approve" {
		var untrusted []string
		for _, s := range st.Servers {
			if slices.Contains(names, s.Name) && s.Reason == events.ReasonUntrusted {
				untrusted = append(untrusted, s.Name)
			}
		}
		c.trustNeeded(ws, untrusted)
	}
	return nil
}

// trust trusts the workspace ws (approve --trust).
func (c *ApproveCommand) trust(ws string) error {
	if ws == "" {
		return errors.New("approve --trust: no workspace (give --workspace DIR)")
	}
	path, added, err := c.env.trustFolder(ws)
	if err != nil {
		return err
	}
	if added {
		fmt.Fprintf(c.env.stdout, "trusted %s (%s)\n", ws, path)
	} else {
		fmt.Fprintf(c.env.stdout, "%s was already trusted (%s)\n", ws, path)
	}
	return nil
}

// trustNeeded says, on stderr, that the approved servers named still
// cannot start until their workspace ws is trusted, and how.
func (c *ApproveCommand) trustNeeded(ws string, names []string) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(c.env.stderr, "%s cannot start yet: the workspace %s is not trusted (stdio servers of its .mcp.json need trust and an approval); trust it: mcpledger trust %s\n",
		strings.Join(names, ", "), ws, shellQuote(ws))
}

// pendingNames are the servers of rows whose current config waits for a
// decision.
func pendingNames(rows []rt.ApprovalRow) []string {
	var out []string
	for _, r := range rows {
		if r.State == "pending" {
			out = append(out, r.Server)
		}
	}
	return out
}

// parseNames parses args, flags and names in any order, and returns the
// names. A bad flag is a usage error; -h returns flag.ErrHelp.
func parseNames(f *commandFlags, args []string) ([]string, error) {
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	return f.Args(), nil
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
		return writeJSON(c.env.stdout, rows, false)
	}
	if len(rows) == 0 {
		fmt.Fprintln(c.env.stdout, "no gated servers (only a workspace's .mcp.json servers need approval)")
		return nil
	}
	t := newTable([]string{"SERVER", "STATE", "CONFIG", "LAST DECISION", "NOTE"})
	st := c.env.styleFor(c.env.stdout)
	now := time.Now()
	for _, r := range rows {
		last := "-"
		if r.Decision != "" {
			last = fmt.Sprintf("%s by %s %s ago for %s", pastTense(r.Decision), r.By, humanAge(now.Sub(time.Unix(0, r.At))), events.ShortHash(r.DecidedHash))
		}
		var note []string
		if len(r.Changed) > 0 {
			note = append(note, "changed: "+strings.Join(r.Changed, ", "))
		}
		if len(r.Withheld) > 0 {
			note = append(note, "withheld tools (definition changed): "+strings.Join(r.Withheld, ", "))
		}
		t.add(r.Server, st.approval(r.State), events.ShortHash(r.Hash), last, strings.Join(note, "; "))
	}
	return t.write(c.env.stdout)
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

// pastTense is the past tense of verb, approve or reject.
func pastTense(verb string) string {
	if strings.HasSuffix(verb, "e") {
		return verb + "d"
	}
	return verb + "ed"
}
