package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/control"
)

// GetCommand is `get NAME` (and `status NAME`): one server's config, as
// the configuration reads now (where it comes from, what shadows what),
// beside its live status: the running mcpledger's, else the journal's
// last session's.
type GetCommand struct{ env *env }

// getResult is get --json.
type getResult struct {
	Name string `json:"name"`
	// Config is the entry as mcpledger reads it now (env and header
	// values as digests), null when no source defines the name.
	Config *events.ServerConfig `json:"config"`
	// Shadowed are the other entries of the name that lose to it
	// ("path:line:col").
	Shadowed []string `json:"shadowed,omitempty"`
	// Status is the server's row in the running mcpledger (Running) or
	// in the journal's last session; null when neither knows it.
	Status  *projections.ServerStatus `json:"status"`
	Running bool                      `json:"running"`
	Session string                    `json:"session,omitempty"`
}

// Run parses args and prints the server.
func (c *GetCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("get", "NAME [--json] [--workspace DIR] [--mcp-config FILE]...")
	var cf configFlags
	cf.register(f)
	asJSON := f.Bool("json", false, `print {"name","config","shadowed","status","running","session"}`)
	pos, tail, err := parseMixed(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || tail != nil {
		return usageErrorf("get: name one server: get NAME")
	}
	name := pos[0]
	r := cf.loader(c.env)()
	res := getResult{Name: name}
	if i := slices.IndexFunc(r.Observed.Servers, func(s events.ServerConfig) bool { return s.Name == name }); i >= 0 {
		res.Config = &r.Observed.Servers[i]
	}
	for _, s := range r.Observed.Shadowed {
		if s.Name == name {
			res.Shadowed = append(res.Shadowed, s.At)
		}
	}
	if err := c.status(ctx, f, &res); err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.env.stdout, res, false)
	}
	if res.Config == nil && res.Status == nil {
		return fmt.Errorf("no server %q: no config source defines it (%s), and the journal has no status for it; add it with mcpledger add %s -- COMMAND [ARGS...]",
			name, strings.Join(r.Files, ", "), name)
	}
	c.print(&res, r.Observed.Trusted)
	return nil
}

// status fills res.Status from the running mcpledger, else from the
// journal's last session (when there is a journal).
func (c *GetCommand) status(ctx context.Context, f *commandFlags, res *getResult) error {
	var rows []projections.ServerStatus
	if cl := f.control(); cl != nil {
		var st control.StatusResult
		if err := cl.Do(ctx, control.Request{Op: "status"}, &st); err != nil {
			return err
		}
		rows, res.Running, res.Session = st.Servers, true, st.Session
	} else {
		path, _, err := f.journalPath()
		if err != nil {
			return nil
		}
		if _, err := os.Stat(path); err != nil {
			return nil // no journal yet: no status
		}
		last, err := c.env.foldLast(ctx, f)
		if err != nil {
			return err
		}
		rows, res.Session = last.set.Status.View().Servers, last.info.Session.String()
	}
	if i := slices.IndexFunc(rows, func(s projections.ServerStatus) bool { return s.Name == res.Name }); i >= 0 {
		res.Status = &rows[i]
	}
	return nil
}

func (c *GetCommand) print(res *getResult, trusted bool) {
	w := c.env.stdout
	fmt.Fprintf(w, "%s:\n", res.Name)
	if cfg := res.Config; cfg != nil {
		fmt.Fprintf(w, "  scope:     %s (%s)\n", cfg.Scope, cfg.Source)
		fmt.Fprintf(w, "  type:      %s\n", cfg.Transport)
		if cfg.Command != "" {
			fmt.Fprintf(w, "  command:   %s\n", cfg.Command)
		}
		if len(cfg.Args) > 0 {
			fmt.Fprintf(w, "  args:      %s\n", strings.Join(cfg.Args, " "))
		}
		if cfg.URL != "" {
			fmt.Fprintf(w, "  url:       %s\n", cfg.URL)
		}
		if len(cfg.Env) > 0 {
			fmt.Fprintf(w, "  env:       %s (values not shown)\n", strings.Join(kvKeys(cfg.Env), ", "))
		}
		if len(cfg.Headers) > 0 {
			fmt.Fprintf(w, "  headers:   %s (values not shown)\n", strings.Join(kvKeys(cfg.Headers), ", "))
		}
		fmt.Fprintf(w, "  config:    %s\n", events.ShortHash(cfg.Hash))
		switch {
		case cfg.Invalid != "":
			fmt.Fprintf(w, "  invalid:   %s\n", cfg.Invalid)
		case cfg.Disabled:
			fmt.Fprintln(w, "  disabled:  yes")
		case cfg.Gated && cfg.Transport == events.TransportStdio && !trusted:
			fmt.Fprintln(w, "  needs:     trust of the workspace (mcpledger trust DIR) and approval (mcpledger approve "+res.Name+")")
		}
	} else {
		fmt.Fprintln(w, "  config:    none (no config source defines it now)")
	}
	for _, at := range res.Shadowed {
		fmt.Fprintf(w, "  shadowed:  %s (loses to the entry above)\n", at)
	}
	st := res.Status
	if st == nil {
		fmt.Fprintln(w, "  status:    unknown (not in the running mcpledger or the journal's last session)")
		return
	}
	where := "in session " + res.Session + ", which has ended or stopped"
	if res.Running {
		where = "running, session " + res.Session
	}
	line := string(st.State)
	if st.Reason != "" {
		line += " (" + string(st.Reason) + ")"
	}
	fmt.Fprintf(w, "  status:    %s, %d tools, since %s  [%s]\n", line, st.Tools, formatTime(st.Since), where)
	if st.Error != "" {
		fmt.Fprintf(w, "  error:     %s\n", st.Error)
	}
	if st.ServerName != "" {
		fmt.Fprintf(w, "  server:    %s %s (protocol %s)\n", st.ServerName, st.ServerVersion, st.ProtocolVersion)
	}
}

func kvKeys(kvs []events.KV) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key
	}
	return out
}

// namedServer reports whether args name a server (a positional argument
// that is not a flag's value): `status NAME` is `get NAME`.
func namedServer(args []string) bool {
	valued := map[string]bool{"journal": true, "workspace": true, "mcp-config": true, "allowed-servers": true, "cursor": true}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return true
		}
		if n := strings.TrimLeft(a, "-"); valued[n] && !strings.Contains(n, "=") {
			i++
		}
	}
	return false
}
