package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpledger/mcpledger/store"
)

// SalvageCommand copies what still reads of a damaged journal into a new
// one (store.Salvage).
type SalvageCommand struct{ env *env }

// Run runs `salvage DAMAGED -o NEW [--json]`: it writes NEW, verified,
// and reports per session what was kept and what was lost. DAMAGED is
// never written; NEW must not exist.
func (c *SalvageCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("salvage", "DAMAGED -o NEW [--json]")
	out := f.String("o", "", "the new journal `FILE` to write (must not exist)")
	asJSON := f.Bool("json", false, "print the report as JSON")
	if err := f.Parse(args); err != nil {
		return err
	}
	src, err := f.oneArg("")
	if err != nil {
		return err
	}
	if src == "" {
		f.Usage()
		return usageErrorf("salvage: name the damaged journal")
	}
	if *out == "" {
		f.Usage()
		return usageErrorf("salvage: name the new journal with -o FILE")
	}
	rep, err := store.Salvage(ctx, src, *out, nil)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeSalvageJSON(c.env.stdout, rep)
	}
	return writeSalvageText(c.env.stdout, rep)
}

// writeSalvageText prints rep for a person: what was copied, then each
// loss, then what to do.
func writeSalvageText(w io.Writer, rep store.SalvageReport) error {
	fmt.Fprintf(w, "salvaged %s into %s: %d events of %d sessions copied (%d leaf pages read); the new journal verifies\n",
		rep.Source, rep.Target, rep.Events, rep.Sessions, rep.Pages)
	lost := false
	for _, s := range rep.PerSession {
		switch {
		case s.Kept == 0:
			fmt.Fprintf(w, "  session %s: lost whole (%s events): %s", s.Session, headText(s.HeadSeq), s.Reason)
			if s.Stranded > 0 {
				fmt.Fprintf(w, " (%d later records found, not copied without it)", s.Stranded)
			}
			fmt.Fprintln(w)
		case s.FirstLost != 0:
			fmt.Fprintf(w, "  session %s: kept seqs 1-%d of %s; lost from seq %d: %s", s.Session, s.Kept, headText(s.HeadSeq), s.FirstLost, s.Reason)
			if s.Stranded > 0 {
				fmt.Fprintf(w, " (%d later records found, not copied without it)", s.Stranded)
			}
			fmt.Fprintln(w)
		case s.Reason != "":
			fmt.Fprintf(w, "  session %s: kept seqs 1-%d; %s\n", s.Session, s.Kept, s.Reason)
		default:
			continue
		}
		lost = true
	}
	switch b := rep.Base; {
	case b.GPos == 0:
	case b.Kept:
		fmt.Fprintf(w, "  base state (the fold of the %d archived records): kept\n", b.GPos)
	default:
		lost = true
		archive := "the archive named by the journal's last journal.archived event (not found)"
		if b.Archive != "" {
			archive = b.Archive
		}
		fmt.Fprintf(w, "  base state: LOST: %s; approvals and other state from before gpos %d are in %s: restore the journal from a backup, or keep that archive to read them\n",
			b.Reason, b.GPos+1, archive)
	}
	if rep.Checkpoints > 0 {
		fmt.Fprintf(w, "  checkpoints: %d dropped (derived from the events; the next run saves new ones)\n", rep.Checkpoints)
	}
	if !lost {
		fmt.Fprintln(w, "nothing was lost")
	}
	_, err := fmt.Fprintf(w, "next: check it with `mcpledger verify --journal %s`, then move %s aside and %s into its place\n", rep.Target, rep.Source, rep.Target)
	return err
}

// headText says how many events a session's head names.
func headText(n uint64) string {
	if n == 0 {
		return "an unknown number (its head is lost)"
	}
	return fmt.Sprint(n)
}

// salvageJSON is `salvage --json`'s output.
type salvageJSON struct {
	Source      string               `json:"source"`
	Target      string               `json:"target"`
	Events      uint64               `json:"events"`
	Sessions    int                  `json:"sessions"`
	Lost        int                  `json:"sessions_lost"`
	Gone        int                  `json:"sessions_gone"`
	Pages       uint64               `json:"leaf_pages"`
	Checkpoints int                  `json:"checkpoints_dropped"`
	Base        *salvageBaseJSON     `json:"base,omitempty"`
	PerSession  []salvageSessionJSON `json:"per_session"`
}

type salvageBaseJSON struct {
	GPos    uint64 `json:"gpos"`
	Kept    bool   `json:"kept"`
	Reason  string `json:"reason,omitempty"`
	Archive string `json:"archive,omitempty"`
}

type salvageSessionJSON struct {
	Session   string `json:"session"`
	Kept      uint64 `json:"kept"`
	HeadSeq   uint64 `json:"head_seq,omitempty"`
	FirstLost uint64 `json:"first_lost,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Stranded  int    `json:"stranded,omitempty"`
}

func writeSalvageJSON(w io.Writer, rep store.SalvageReport) error {
	out := salvageJSON{Source: rep.Source, Target: rep.Target, Events: rep.Events, Sessions: rep.Sessions, Lost: rep.Lost, Gone: rep.Gone,
		Pages: rep.Pages, Checkpoints: rep.Checkpoints, PerSession: []salvageSessionJSON{}}
	if b := rep.Base; b.GPos != 0 {
		out.Base = &salvageBaseJSON{GPos: b.GPos, Kept: b.Kept, Reason: b.Reason, Archive: b.Archive}
	}
	for _, s := range rep.PerSession {
		out.PerSession = append(out.PerSession, salvageSessionJSON{Session: s.Session.String(), Kept: s.Kept, HeadSeq: s.HeadSeq,
			FirstLost: s.FirstLost, Reason: s.Reason, Stranded: s.Stranded})
	}
	return writeJSON(w, out, true)
}

// damagedHint adds to err, a command's error on the journal at path that
// is damaged (store.ErrCorrupt), what to do: salvage copies what still
// reads. Other errors, and errors that say so already, are returned as
// they are.
func damagedHint(err error, path string) error {
	if err == nil || path == "" || !errors.Is(err, store.ErrCorrupt) || strings.Contains(err.Error(), "mcpledger salvage") {
		return err
	}
	return fmt.Errorf("%w\n(the journal is damaged: `mcpledger verify --journal %s` names the first damage; `mcpledger salvage %s -o %s.salvaged` copies what still reads into a new journal and reports what was lost)", err, path, path, path)
}
