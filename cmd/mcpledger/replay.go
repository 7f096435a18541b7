package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/store"
)

// ReplayCommand folds a recorded session to any point and prints its
// status, catalog and approvals then; --verify re-runs the decider on the
// session's inputs and fails on the first divergence.
type ReplayCommand struct{ env *env }

// Run parses args and replays.
func (c *ReplayCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("replay", "[SESSION|last] [--until SEQ|TIME] [--verify] [--json]")
	until := f.String("until", "", "stop after this event: a seq, or a time (RFC 3339)")
	verify := f.Bool("verify", false, "re-run the decider on every recorded input and compare its decisions")
	asJSON := f.Bool("json", false, "print the snapshot as JSON")
	if err := f.Parse(args); err != nil {
		return err
	}
	arg, err := f.oneArg("last")
	if err != nil {
		return err
	}
	j, err := f.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer j.Close()
	info, err := findSession(ctx, j, arg)
	if err != nil {
		return err
	}
	if *verify {
		if err := replay.Verify(ctx, j, info.Session); err != nil {
			return fmt.Errorf("session %s: %w", info.Session, err)
		}
		fmt.Fprintf(c.env.stdout, "session %s verifies: the decider decides exactly what was recorded (%d events)\n", info.Session, info.LastSeq)
		if *until == "" && !*asJSON {
			return nil
		}
	}
	evs, err := replay.Session(ctx, j, info.Session)
	if err != nil {
		return err
	}
	seq, err := untilSeq(evs, *until)
	if err != nil {
		return err
	}
	snap, err := replay.At(ctx, readJournal{j}, info.Session, seq)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.env.stdout, snap, false)
	}
	w := c.env.stdout
	fmt.Fprintf(w, "session %s after seq %d (%s)\n\n", snap.Session, snap.Seq, time.Unix(0, snap.Time).UTC().Format(time.RFC3339Nano))
	printStatus(w, c.env.styleFor(w), snap.Status.Servers, time.Unix(0, snap.Time), "STATE")
	fmt.Fprintf(w, "\ntools (%d):\n", len(snap.Catalog.Tools))
	for _, t := range snap.Catalog.Tools {
		mark := ""
		switch {
		case t.Deferred:
			mark = "  (deferred)"
		case t.Stale:
			mark = "  (stale)"
		}
		fmt.Fprintf(w, "  %s%s\n", t.Name, mark)
	}
	for _, u := range snap.Catalog.Unavailable {
		fmt.Fprintf(w, "  unavailable: %s %s %s\n", u.Server, u.State, dash(string(u.Reason)))
	}
	for _, wt := range snap.Catalog.Withheld {
		fmt.Fprintf(w, "  withheld: %s/%s (%s)\n", wt.Server, wt.Tool, wt.Reason)
	}
	if len(snap.Lost) > 0 {
		fmt.Fprintf(w, "\ncalls lost (%d): the outcome is unknown, the server may or may not have run them\n", len(snap.Lost))
		printLost(w, snap.Lost)
	}
	if len(snap.Approvals) > 0 {
		fmt.Fprintln(w, "\napprovals:")
		for _, a := range snap.Approvals {
			if a.Decision != nil {
				fmt.Fprintf(w, "  %s %s: %s by %s for %s\n", a.Workspace, a.Server, a.Decision.Decision, a.Decision.By, events.ShortHash(a.Decision.Hash))
			}
			if a.Pending != nil {
				fmt.Fprintf(w, "  %s %s: pending for %s\n", a.Workspace, a.Server, events.ShortHash(a.Pending.Hash))
			}
		}
	}
	return nil
}

// untilSeq turns --until (a seq or an RFC 3339 time) into a seq; "" is the
// last event.
func untilSeq(evs []events.Event, until string) (uint64, error) {
	if until == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(until, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, until)
	if err != nil {
		return 0, usageErrorf("--until %q is neither a seq nor an RFC 3339 time (2026-11-22T14:02:00Z)", until)
	}
	return replay.SeqAt(evs, t.UnixNano())
}

// ExportCommand writes a session as sealed JSONL (replay.WriteExport), to
// attach to a bug report or move to another journal.
type ExportCommand struct{ env *env }

// Run parses args and exports.
func (c *ExportCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("export", "SESSION|last [--sign] > session.jsonl")
	sign := f.Bool("sign", false, "sign the export with your key ("+exportKeyFile+" in the user config directory, made on first use); import --signer FINGERPRINT then requires it")
	if err := f.Parse(args); err != nil {
		return err
	}
	arg, err := f.oneArg("last")
	if err != nil {
		return err
	}
	var opts replay.WriteExportOptions
	if *sign {
		key, path, err := c.env.exportKey()
		if err != nil {
			return err
		}
		opts.Sign = key
		fmt.Fprintf(c.env.stderr, "signed by %s (key %s)\n", replay.Fingerprint(key.Public().(ed25519.PublicKey)), path)
	}
	j, err := f.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer j.Close()
	info, err := findSession(ctx, j, arg)
	if err != nil {
		return err
	}
	evs, err := replay.Session(ctx, j, info.Session)
	if err != nil && len(evs) > 0 && errors.Is(err, store.ErrCorrupt) {
		// A damaged session: what reads up to the damage, then the error.
		if werr := replay.WriteJSONL(c.env.stdout, evs); werr != nil {
			return werr
		}
		return fmt.Errorf("export: wrote seqs 1-%d of session %s, then: %w", evs[len(evs)-1].Seq, info.Session, err)
	}
	if err != nil {
		return err
	}
	_, err = replay.WriteExport(c.env.stdout, evs, opts)
	return err
}

// ImportCommand reads an exported session into this journal after
// checking its seal and verifying that it replays.
type ImportCommand struct{ env *env }

// Run parses args and imports.
func (c *ImportCommand) Run(ctx context.Context, args []string) error {
	if importsFrom(args) { // import --from CLIENT: another client's servers
		return (&ImportFromCommand{env: c.env}).Run(ctx, args)
	}
	f := c.env.newCommandFlags("import", "FILE.jsonl [--signer FINGERPRINT] [--unsealed]\n       (import --from CLIENT imports the servers another MCP client configured: mcpledger import --from vscode -h)")
	unsealed := f.Bool("unsealed", false, "accept an export without digests (from a build before exports were sealed, or log --json): edits to it cannot be detected")
	signer := f.String("signer", "", "require the export to be signed (export --sign) by the key of this fingerprint (SHA256:…)")
	if err := f.Parse(args); err != nil {
		return err
	}
	path, err := f.oneArg("")
	if err != nil {
		return err
	}
	if path == "" {
		f.Usage()
		return usageErrorf("import: name the exported file")
	}
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	prog := c.env.progress("importing "+path+": reading and checking the export", progressAfter)
	defer prog.end()
	x, err := replay.ReadExport(fh, replay.ReadExportOptions{Unsealed: *unsealed, Signer: *signer})
	fh.Close()
	switch {
	case errors.Is(err, replay.ErrSigner):
		return fmt.Errorf("import %s: %w; nothing was imported: ask its sender for an export made with export --sign by that key", path, err)
	case errors.Is(err, replay.ErrUnsealed):
		return fmt.Errorf("import %s: %w (it was written before exports were sealed, or by log --json); export the session again with this build, or pass --unsealed if you trust where the file came from", path, err)
	case errors.Is(err, replay.ErrTampered), errors.Is(err, replay.ErrTruncated):
		return fmt.Errorf("import %s: %w; nothing was imported: export the session again from the journal it came from (an edited or cut export cannot be imported)", path, err)
	case err != nil:
		return fmt.Errorf("import %s: %w", path, err)
	}
	if len(x.Events) == 0 {
		return fmt.Errorf("import %s: no events", path)
	}
	evs, sid := x.Events, x.Events[0].Session
	if err := replay.VerifyEvents(evs); err != nil {
		return fmt.Errorf("import %s: the session does not replay: %w", path, err)
	}
	prog.set("importing " + path + ": writing " + strconv.Itoa(len(evs)) + " events")
	j, _, err := f.openWritable()
	if err != nil {
		return err
	}
	defer j.Close()
	held, err := replay.Session(ctx, j, sid)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, replay.ErrEmptySession) {
		return err
	}
	if len(held) > 0 {
		if err := x.Conflict(held); err != nil {
			return fmt.Errorf("import %s: session %s: %w\n(nothing was imported: one of the two was changed; see what the journal holds with mcpledger export %s, or import the file into another journal with --journal)", path, sid, err, sid)
		}
		fmt.Fprintf(c.env.stdout, "session %s was already imported (the same %d events)\n", sid, len(evs))
		return nil
	}
	if _, err := j.Append(ctx, sid, store.NoStream, evs); errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("import %s: %w (the journal holds some of its events in another session: nothing was imported)", path, err)
	} else if err != nil {
		return err
	}
	prog.set("importing " + path + ": verifying the imported session")
	if err := replay.Verify(ctx, j, sid); err != nil {
		return fmt.Errorf("import %s: imported, but it does not verify from the journal: %w", path, err)
	}
	prog.end()
	if x.Trailer == nil {
		fmt.Fprintf(c.env.stdout, "imported session %s (%d events, verified; UNSEALED: edits to the file before this import cannot be detected)\n", sid, len(evs))
		return nil
	}
	signed := ""
	if fp := x.Signer(); fp != "" {
		signed = ", signed by " + fp
	}
	fmt.Fprintf(c.env.stdout, "imported session %s (%d events, seal %s intact%s, verified)\n", sid, len(evs), events.ShortHash(x.Trailer.Head), signed)
	return nil
}

// WhyCommand explains whether a tool was available at some moment.
type WhyCommand struct{ env *env }

// Run parses args and explains.
func (c *WhyCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("why", "TOOL [--session SESSION|last] [--at SEQ|TIME] [--json]")
	session := f.String("session", "last", "the session (ID, prefix or last)")
	at := f.String("at", "", "the moment: a seq, or a time (RFC 3339); default the session's end")
	asJSON := f.Bool("json", false, "print the explanation as JSON")
	if err := f.Parse(args); err != nil {
		return err
	}
	tool, err := f.oneArg("")
	if err != nil {
		return err
	}
	if tool == "" {
		f.Usage()
		return usageErrorf("why: name the tool (mcp__server__tool)")
	}
	sj, err := f.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer sj.Close()
	j := readJournal{sj}
	info, err := findSession(ctx, sj, *session)
	if err != nil {
		return err
	}
	evs, err := replay.Session(ctx, j, info.Session)
	if err != nil {
		return err
	}
	seq, err := untilSeq(evs, *at)
	if err != nil {
		return err
	}
	ex, err := replay.Why(ctx, j, info.Session, tool, seq)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.env.stdout, ex, false)
	}
	verdict := "was NOT in the catalog"
	if ex.Available {
		verdict = "was in the catalog"
	}
	fmt.Fprintf(c.env.stdout, "%s %s after seq %d of session %s\n", tool, verdict, ex.Seq, info.Session)
	for _, r := range ex.Reasons {
		if r.Seq > 0 {
			fmt.Fprintf(c.env.stdout, "  - %s   [seq %d]\n", r.Text, r.Seq)
		} else {
			fmt.Fprintf(c.env.stdout, "  - %s\n", r.Text)
		}
	}
	if len(ex.Lost) > 0 {
		fmt.Fprintf(c.env.stdout, "calls of %s lost by then (%d): the outcome is unknown, the server may or may not have run them\n", tool, len(ex.Lost))
		printLost(c.env.stdout, ex.Lost)
	}
	if !ex.Available && ex.Server != "" {
		if st, ok := lastState(evs, ex.Seq, ex.Server); ok {
			r := rt.Recovery(ex.Server, st.Reason, st.To)
			if ws := lastWorkspace(evs, ex.Seq); st.Reason == events.ReasonUntrusted && ws != "" {
				r = untrustedRecovery(ex.Server, ws)
			}
			if r != "" {
				fmt.Fprintf(c.env.stdout, "  recovery: %s\n", r)
			}
		}
	}
	return nil
}

// printLost writes one line per lost call: where it started, where it
// was recorded lost, and why.
func printLost(w io.Writer, lost []replay.LostCall) {
	for _, c := range lost {
		fmt.Fprintf(w, "  %s call %s started at seq %d, lost at seq %d: %s\n", c.Name, c.CallID, c.Started, c.Seq, c.Error)
	}
}

// lastWorkspace is the workspace of the last config reading in evs up to
// seq ("" for none).
func lastWorkspace(evs []events.Event, seq uint64) string {
	ws := ""
	for _, e := range evs {
		if e.Seq > seq {
			break
		}
		if p, ok := e.Payload.(*events.ConfigObserved); ok {
			ws = p.Workspace
		}
	}
	return ws
}

func lastState(evs []events.Event, seq uint64, server string) (*events.ServerTransitioned, bool) {
	var last *events.ServerTransitioned
	for _, e := range evs {
		if e.Seq > seq {
			break
		}
		if p, ok := e.Payload.(*events.ServerTransitioned); ok && e.Server == server {
			last = p
		}
	}
	return last, last != nil
}
