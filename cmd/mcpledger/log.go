package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// LogCommand prints journal events.
type LogCommand struct {
	env *env
}

// Run runs `log [--session ID|last] [--server N] [--kind K] [--from GPOS] [--follow] [--json]`.
func (c *LogCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("log", "[--session ID|last] [--server N] [--kind K] [--from GPOS] [--follow] [--json]")
	sessionArg := f.String("session", "", "only the session `ID` (a unique prefix, or last)")
	server := f.String("server", "", "only events about the server `N`")
	kind := f.String("kind", "", "only events of kind `K` (e.g. server.transitioned)")
	follow := f.Bool("follow", false, "after the stored events, print new ones as they are committed, until interrupted")
	asJSON := f.Bool("json", false, "print one JSON object a line")
	fromGPos := f.Uint64("from", 0, "start at global position `GPOS` (the gpos of --json output: one more than the last one seen resumes a follow)")
	if err := f.parse(args); err != nil {
		return err
	}
	if *kind != "" && !events.Kind(*kind).Valid() {
		names := make([]string, 0, len(events.Kinds()))
		for _, k := range events.Kinds() {
			names = append(names, string(k))
		}
		return usageErrorf("log: unknown kind %q; kinds are %s", *kind, strings.Join(names, ", "))
	}
	if *follow {
		c.env.lowerPriority(followerNice)
		if c.env.getenv("GOGC") == "" {
			debug.SetGCPercent(400) // a follower's heap is small: collect it less often
		}
		if err := c.awaitJournal(ctx, f); err != nil {
			return err
		}
	}
	j, err := f.openReadOnly(ctx)
	if err != nil {
		return err
	}
	defer j.Close()

	var session uuid.UUID
	from := uint64(1)
	if *sessionArg != "" {
		info, err := findSession(ctx, j, *sessionArg)
		if err != nil {
			return err
		}
		session, from = info.Session, info.FirstGPos
	}
	from = max(from, *fromGPos)

	w := &flusher{w: bufio.NewWriter(c.env.stdout)}
	defer w.stop()
	print := func(e events.Event) error {
		if (session != uuid.Nil && e.Session != session) || (*server != "" && e.Server != *server) ||
			(*kind != "" && string(e.Kind) != *kind) {
			return nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if *asJSON {
			var err error
			if w.line, err = e.AppendJSON(w.line[:0]); err != nil {
				return fmt.Errorf("event %s/%d: %w", e.Session, e.Seq, err)
			}
			w.w.Write(append(w.line, '\n'))
		} else {
			writeEventLine(w.w, &e)
		}
		if *follow {
			return w.soon()
		}
		return nil
	}
	switch {
	case *follow:
		err = j.Follow(ctx, from, print)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil // interrupted: the normal end of --follow
		}
	case session != uuid.Nil && *fromGPos == 0:
		err = j.ReadSession(ctx, session, 1, print)
	default:
		err = j.ReadAll(ctx, from, print)
	}
	if ferr := w.flush(); err == nil {
		err = ferr
	}
	return err
}

// awaitJournal waits for the journal file to exist, for a follow started
// before the first run.
func (c *LogCommand) awaitJournal(ctx context.Context, f *commandFlags) error {
	path, _, err := f.journalPath()
	if err != nil {
		return err
	}
	said := false
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if !said {
			fmt.Fprintf(c.env.stderr, "mcpledger: waiting for the journal %s to be created\n", path)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: the normal end of --follow
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// followFlushDelay is the least time between two writes of a follow's
// output: an event after a quiet moment is written at once, those of a
// burst share writes, and none waits more than this.
const followFlushDelay = 5 * time.Millisecond

// flusher is log's output: buffered, and for --follow flushed
// followFlushDelay after the first event written since the last flush.
type flusher struct {
	mu    sync.Mutex
	w     *bufio.Writer
	timer *time.Timer
	err   error     // the last flush's
	last  time.Time // when it was
	line  []byte    // the line being written, reused
	// stopped is set when the command ends; a timed flush that fires
	// after it does nothing.
	stopped bool
}

// soon flushes now if the last flush is followFlushDelay old, else arms a
// flush for when it will be. Callers hold mu.
func (f *flusher) soon() error {
	if f.err != nil {
		return f.err // stdout is gone (a closed pipe): stop following
	}
	if f.timer != nil {
		return nil
	}
	if wait := followFlushDelay - time.Since(f.last); wait > 0 {
		f.timer = time.AfterFunc(wait, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.stopped {
				return // the command has ended: its output is not this func's any more
			}
			f.timer = nil
			f.err, f.last = f.w.Flush(), time.Now()
		})
		return nil
	}
	f.err, f.last = f.w.Flush(), time.Now()
	return f.err
}

func (f *flusher) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Flush()
}

func (f *flusher) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
}
