package main

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/store"
)

// ArchiveCommand moves old sessions out of the live journal.
type ArchiveCommand struct {
	env *env
}

// archiveReport is what `archive --json` prints.
type archiveReport struct {
	Archive     string   `json:"archive,omitempty"`
	Sessions    []string `json:"sessions"`
	Events      uint64   `json:"events"`
	From        uint64   `json:"from,omitempty"`
	Through     uint64   `json:"through,omitempty"`
	Kept        int      `json:"kept"`
	BytesBefore int64    `json:"bytes_before"`
	BytesAfter  int64    `json:"bytes_after"`
	DurationMs  float64  `json:"duration_ms"` // how long it took
	EventsPerS  float64  `json:"events_per_s,omitempty"`
	// Blocked says why older sessions stayed: the oldest session that
	// is still running, interrupted or recent, and ahead of them.
	Blocked string `json:"blocked,omitempty"`
}

// Run runs `archive --older-than D [--to DIR] [--json]`.
func (c *ArchiveCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("archive", "--older-than DURATION [--to DIR] [--json]")
	older := f.String("older-than", "", "move sessions that ended before this long ago (e.g. 30d, 12h, 90m)")
	to := f.String("to", "", "`DIR` for the archive file (default: beside the journal)")
	asJSON := f.Bool("json", false, "print the result as JSON")
	if err := f.parse(args); err != nil {
		return err
	}
	if *older == "" {
		return usageErrorf("archive: --older-than is required (e.g. --older-than 30d)")
	}
	age, err := parseAge(*older)
	if err != nil {
		return usageErrorf("archive: --older-than %s", err)
	}
	path, _, err := f.journalPath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no journal at %s; pass --journal PATH or set MCPLEDGER_JOURNAL", path)
	}
	prog := c.env.progress("archiving the sessions of "+path+" that ended over "+*older+" ago", progressAfter)
	rep, err := c.env.archive(ctx, path, *to, time.Now().Add(-age))
	prog.end()
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(c.env.stdout, rep, true)
	}
	_, err = fmt.Fprintln(c.env.stdout, rep.summary())
	return err
}

func (r archiveReport) summary() string {
	if r.Archive == "" {
		s := "nothing to archive: no session ended before the cutoff"
		if r.Blocked != "" {
			s = "nothing to archive: " + r.Blocked
		}
		return s
	}
	s := fmt.Sprintf("archived %d sessions (%d events) to %s in %s (%.0f events/s); the journal went from %s to %s",
		len(r.Sessions), r.Events, r.Archive, humanDuration(time.Duration(r.DurationMs*float64(time.Millisecond))), r.EventsPerS, mib(r.BytesBefore), mib(r.BytesAfter))
	if r.Blocked != "" {
		s += "\n" + r.Blocked
	}
	return s
}

func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", (n+1023)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// parseAge parses a duration with day (d) and week (w) units besides Go's
// (30d, 2w, 12h, 90m).
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	unit := time.Duration(0)
	switch {
	case strings.HasSuffix(s, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(s, "w"):
		unit = 7 * 24 * time.Hour
	}
	var d time.Duration
	if unit != 0 {
		n, err := strconv.ParseFloat(s[:len(s)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: not a duration (use 30d, 2w, 12h or 90m)", s)
		}
		d = time.Duration(n * float64(unit))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: not a duration (use 30d, 2w, 12h or 90m)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be positive", s)
	}
	return d, nil
}

// archive moves the sessions of the journal at path that ended before
// cutoff, as a prefix of the log (a session still running, interrupted
// or recent stops it: everything after it stays), into a sealed archive
// in dir (default: the journal's directory). The live journal keeps, as
// its base state, the fold of what moved, and records journal.archived in
// a short session of its own.
func (e *env) archive(ctx context.Context, path, dir string, cutoff time.Time) (archiveReport, error) {
	t0 := time.Now()
	rep := archiveReport{Sessions: []string{}}
	j, err := e.openJournal(path, &store.Options{ReadOnly: true, LockTimeout: time.Second})
	if err != nil {
		return rep, e.lockedError(path, err, "archive")
	}
	through, sessions, blocked, err := e.archivePlan(ctx, j, cutoff)
	if err == nil && through > 0 {
		var h *projections.History
		if h, err = e.history(ctx, j, through+1); err == nil {
			rep.From, rep.Through = j.Base()+1, through
			rep.BytesBefore = sizeOf(path)
			base := h.Encode()
			j.Close()
			return e.archiveThrough(ctx, path, dir, cutoff, base, rep, sessions, blocked, t0)
		}
	}
	j.Close()
	rep.Blocked, rep.Kept = blocked, sessions
	rep.BytesBefore, rep.BytesAfter = sizeOf(path), sizeOf(path)
	rep.DurationMs = time.Since(t0).Seconds() * 1000
	return rep, err
}

func (e *env) archiveThrough(ctx context.Context, path, dir string, cutoff time.Time, base []byte,
	rep archiveReport, kept int, blocked string, t0 time.Time) (archiveReport, error) {
	if dir == "" {
		dir = filepath.Dir(path)
	}
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	archivePath := filepath.Join(dir, fmt.Sprintf("%s-archive-%d-%d.db", name, rep.From, rep.Through))
	if abs, err := filepath.Abs(archivePath); err == nil {
		archivePath = abs
	}
	file := archivePath
	if absJ, err := filepath.Abs(path); err == nil && filepath.Dir(absJ) == filepath.Dir(archivePath) {
		file = filepath.Base(archivePath) // beside the journal: moves with it
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return rep, fmt.Errorf("archive directory %s: %w (choose another with --to DIR)", dir, err)
	}
	if probe, err := os.CreateTemp(dir, ".mcpledger-probe-*"); err != nil {
		return rep, fmt.Errorf("archive directory %s is not writable: %w (choose another with --to DIR)", dir, err)
	} else {
		probe.Close()
		os.Remove(probe.Name())
	}
	finish := func(r store.ArchiveResult) (uuid.UUID, []events.Event) {
		return archiveSession(r, file, cutoff)
	}
	res, err := store.Archive(ctx, path, archivePath, rep.Through, base, finish, &store.ArchiveOptions{LockTimeout: time.Second})
	if err != nil {
		return rep, e.lockedError(path, err, "archive")
	}
	rep.Archive = archivePath
	for _, s := range res.Sessions {
		rep.Sessions = append(rep.Sessions, s.Session.String())
		rep.Events += s.LastSeq
	}
	rep.Kept, rep.Blocked = kept, blocked
	rep.BytesAfter = res.SizeAfter
	took := time.Since(t0)
	rep.DurationMs = took.Seconds() * 1000
	if took > 0 {
		rep.EventsPerS = float64(res.Through-res.From+1) / took.Seconds()
	}
	return rep, nil
}

// archivePlan finds the last global position to archive: the end of the
// longest prefix of the log whose sessions all stopped, and stopped before
// cutoff. It returns 0 when there is none, the number of sessions that
// stay, and what kept older sessions from going.
func (e *env) archivePlan(ctx context.Context, j *store.Journal, cutoff time.Time) (uint64, int, string, error) {
	heads, err := j.Sessions(ctx)
	if err != nil {
		return 0, 0, "", err
	}
	h, err := e.history(ctx, j, 0)
	if err != nil {
		return 0, 0, "", err
	}
	slices.SortFunc(heads, func(a, b store.SessionInfo) int { return cmp.Compare(a.FirstGPos, b.FirstGPos) })
	var through, reach uint64
	taken := 0
	blocked := ""
	for i, s := range heads {
		if !archivable(s, h, cutoff) {
			why := "still running or interrupted"
			if sum, _ := h.Session(s.Session); sum.Stopped {
				why = "ended after the cutoff"
			}
			if slices.ContainsFunc(heads[i+1:], func(s store.SessionInfo) bool { return archivable(s, h, cutoff) }) {
				blocked = fmt.Sprintf("session %s (%s, started %s) and everything after it stay: the archive takes the oldest sessions in journal order",
					s.Session, why, time.Unix(0, s.FirstTime).UTC().Format(time.RFC3339))
			}
			break
		}
		reach = max(reach, s.LastGPos)
		if i+1 == len(heads) || heads[i+1].FirstGPos > reach {
			through, taken = reach, i+1
		}
	}
	return through, len(heads) - taken, blocked, nil
}

// archivable reports whether session s stopped, and before cutoff.
func archivable(s store.SessionInfo, h *projections.History, cutoff time.Time) bool {
	sum, _ := h.Session(s.Session)
	return sum.Stopped && s.LastTime < cutoff.UnixNano()
}

// archiveSession is the short session that records an archive: its
// start, the journal.archived fact, and its stop with the decisions the
// decider makes for it, so that it replays like any other.
func archiveSession(r store.ArchiveResult, file string, cutoff time.Time) (uuid.UUID, []events.Event) {
	sid := events.NewID()
	now := time.Now().UnixNano()
	host, _ := os.Hostname()
	arch := &events.JournalArchived{File: file, From: r.From, Through: r.Through, Digest: hex.EncodeToString(r.Digest[:]), Cutoff: cutoff.UnixNano()}
	for _, s := range r.Sessions {
		arch.Sessions = append(arch.Sessions, events.ArchivedSession{Session: s.Session.String(), Events: s.LastSeq, Head: hex.EncodeToString(s.Head[:])})
	}
	inputs := []events.Payload{
		&events.SessionStarted{Seed: 1, Build: buildID(), Version: version(), PID: os.Getpid(), Host: host, Command: "archive",
			Options: fsm.WithDefaults(events.DeciderOptions{})},
		arch,
		&events.StopRequested{Reason: events.ReasonShutdown, By: "archive"},
	}
	var out []events.Event
	var st fsm.State
	for _, p := range inputs {
		in := events.Event{Session: sid, Seq: uint64(len(out) + 1), Time: now, Kind: p.Kind(), V: p.Kind().Version(), ID: events.NewID(), Payload: p}
		decs, _ := fsm.Decide(st, in) // inputs of a session with no servers: nothing to refuse
		st = fsm.Evolve(st, in)
		out = append(out, in)
		for _, d := range decs {
			d.Seq, d.ID = uint64(len(out)+1), events.NewID()
			st = fsm.Evolve(st, d)
			out = append(out, d)
		}
	}
	return sid, out
}

func sizeOf(path string) int64 {
	if info, err := os.Stat(path); err == nil {
		return info.Size()
	}
	return 0
}

// lockedError names the process holding the journal when err is
// ErrLocked, and says what to do.
func (e *env) lockedError(path string, err error, what string) error {
	if !errors.Is(err, store.ErrLocked) {
		return err
	}
	holder := "another process"
	if h, ok := store.LockHolder(path); ok {
		holder = h.String()
	}
	return fmt.Errorf("%s needs the journal %s alone, and %s holds it: stop it, or use run --retain DURATION to archive at the start of a run", what, path, holder)
}
