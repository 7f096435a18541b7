package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
)

// What run, serve and status say when servers wait for trust or an
// approval: the exact command that admits them.

// waitingServers returns the servers of rows that wait for the workspace
// to be trusted (untrusted) and those that wait for an approval of their
// config (pending_approval, or a tool definition changed since the
// approval), each in rows' order.
func waitingServers(rows []projections.ServerStatus) (untrusted, pending []string) {
	for _, s := range rows {
		switch s.Reason {
		case events.ReasonUntrusted:
			if s.State == events.StateStopped {
				untrusted = append(untrusted, s.Name)
			}
		case events.ReasonPendingApproval:
			if s.State == events.StateStopped {
				pending = append(pending, s.Name)
			}
		case events.ReasonToolChanged:
			pending = append(pending, s.Name)
		}
	}
	return untrusted, pending
}

// nextStep returns the command that admits every server of rows waiting
// for trust or approval, and what it does; "" when none waits. ws is the
// workspace of the reading (canonical), cwd the directory the command
// will run in: approve is given --workspace when they differ. Servers
// waiting for trust are stdio servers of the project's .mcp.json, which
// also need an approval: `approve --trust` does both.
func nextStep(rows []projections.ServerStatus, ws, cwd string) (cmd, does string) {
	untrusted, pending := waitingServers(rows)
	if len(untrusted)+len(pending) == 0 {
		return "", ""
	}
	args := []string{"mcpledger", "approve"}
	if len(untrusted) > 0 {
		args = append(args, "--trust")
	}
	if ws != "" && !sameDir(ws, cwd) {
		args = append(args, "--workspace", shellQuote(ws))
	}
	names := slices.Concat(untrusted, pending)
	for _, n := range names {
		args = append(args, shellQuote(n))
	}
	cmd = strings.Join(args, " ")
	list := strings.Join(names, ", ")
	if len(untrusted) == 0 {
		return cmd, fmt.Sprintf("approves %s as configured now; mcpledger reject NAME refuses one", list)
	}
	dir := ws
	if dir == "" {
		dir = "DIR"
	}
	two := "mcpledger trust " + shellQuote(dir) + "; " + strings.Join(slicesWithout(args, "--trust"), " ")
	return cmd, fmt.Sprintf("trusts %s and approves %s as configured now; in two steps: %s", dir, list, two)
}

// printNextStep writes the next step (nextStep) for the servers of rows
// that wait for trust or approval, if any, as "next: COMMAND" and what
// it does.
func printNextStep(w io.Writer, rows []projections.ServerStatus, ws string) {
	cwd, _ := os.Getwd()
	if cmd, does := nextStep(rows, ws, cwd); cmd != "" {
		fmt.Fprintf(w, "next: %s\n  (%s)\n", cmd, does)
	}
}

// recovery says why a server of state st and reason r waits and what to
// do: rt.Recovery, except for a server waiting for trust or an approval,
// whose command the "next:" line that follows gives for all of them at
// once (printNextStep): for those it says what is missing, naming the
// workspace ws.
func recovery(name string, r events.Reason, st events.ServerState, ws string) string {
	switch {
	case r == events.ReasonUntrusted && ws != "":
		return fmt.Sprintf("the workspace %s is not trusted", ws)
	case r == events.ReasonPendingApproval:
		return "its config is not approved"
	}
	return rt.Recovery(name, r, st)
}

// untrustedRecovery is the recovery of server, waiting for its workspace
// ws to be trusted: the command that trusts it and approves the server.
func untrustedRecovery(server, ws string) string {
	cwd, _ := os.Getwd()
	cmd, _ := nextStep([]projections.ServerStatus{{Name: server, State: events.StateStopped, Reason: events.ReasonUntrusted}}, ws, cwd)
	return fmt.Sprintf("the workspace %s is not trusted: %s (trusts it and approves %s)", ws, cmd, server)
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	if b == "" {
		return false
	}
	if real, err := filepath.EvalSymlinks(b); err == nil {
		b = real
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func slicesWithout(s []string, drop string) []string {
	out := make([]string, 0, len(s))
	for _, x := range s {
		if x != drop {
			out = append(out, x)
		}
	}
	return out
}
