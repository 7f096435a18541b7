package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// TimelineCommand writes a session as one self-contained HTML page.
type TimelineCommand struct{ env *env }

// Run runs `timeline SESSION -o FILE [--width PX]`.
func (c *TimelineCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("timeline", "SESSION -o FILE [--width PX]")
	out := f.String("o", "", "write the page to `FILE` (- for standard output)")
	width := f.Int("width", 0, "width of the time axis in `PX` (default: from the session's length and density)")
	if err := f.Parse(args); err != nil {
		return err
	}
	sessionArg, err := f.oneArg("")
	switch {
	case err != nil:
		return err
	case sessionArg == "":
		f.Usage()
		return usageErrorf("timeline: name the session (an ID, a unique prefix, or last)")
	case *out == "":
		f.Usage()
		return usageErrorf("timeline: -o FILE is required (- writes to standard output)")
	case *width < 0:
		return usageErrorf("timeline: --width must be positive")
	}
	j, err := f.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer j.Close()
	info, err := findSession(ctx, j, sessionArg)
	if err != nil {
		return err
	}
	var evs []events.Event
	if err := j.ReadSession(ctx, info.Session, 1, func(e events.Event) error {
		evs = append(evs, e)
		return nil
	}); err != nil {
		return err
	}
	opts := &replay.TimelineOptions{Width: *width, Source: j.Path()}
	if *out == "-" {
		w := bufio.NewWriter(c.env.stdout)
		if err := replay.Timeline(w, evs, opts); err != nil {
			return err
		}
		return w.Flush()
	}
	if err := writeFileAtomic(*out, func(w *bufio.Writer) error { return replay.Timeline(w, evs, opts) }); err != nil {
		return err
	}
	fmt.Fprintf(c.env.stderr, "wrote %s: session %s, %d events\n", *out, info.Session, len(evs))
	return nil
}

// writeFileAtomic writes path through a temporary file in its directory,
// renamed over path only when fill and the flush succeed.
func writeFileAtomic(path string, fill func(*bufio.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: a no-op
	w := bufio.NewWriter(tmp)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
