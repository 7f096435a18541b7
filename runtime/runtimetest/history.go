package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
	"github.com/mcpledger/mcpledger/store"
)

// historyVersion names the layout of the journals History builds; bump it
// when BuildHistory changes what it writes, so cached files are rebuilt.
const historyVersion = 3

// History returns the path of a copy, in a temporary directory of tb, of
// a journal holding sessions recorded sessions of about perSession events
// each, spread over the 90 days before now: the first is
// testdata/journals/approvals.jsonl (an approval decided 80+ days ago),
// the others crash-loop.jsonl, each with call.started/call.finished pairs
// repeated before its shutdown until it has perSession events. The
// journal is built once per size and kept under the user cache directory
// (mcpledger/history), since a million events take a while to write; the
// copy is the caller's to change.
func History(tb testing.TB, sessions, perSession int) string {
	tb.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "mcpledger", "history")
	src := filepath.Join(dir, fmt.Sprintf("v%d-%dx%d.db", historyVersion, sessions, perSession))
	if _, err := os.Stat(src); err != nil {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			tb.Fatal(err)
		}
		tmp := src + fmt.Sprintf(".%d.tmp", os.Getpid())
		_ = os.Remove(tmp)
		if err := buildHistory(tmp, sessions, perSession); err != nil {
			_ = os.Remove(tmp)
			tb.Fatalf("building the history journal: %v", err)
		}
		if err := os.Rename(tmp, src); err != nil {
			tb.Fatal(err)
		}
	}
	dst := filepath.Join(tb.TempDir(), "journal.db")
	if err := copyFile(dst, src); err != nil {
		tb.Fatal(err)
	}
	return dst
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func buildHistory(path string, sessions, perSession int) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	read := func(name string) ([]events.Event, error) {
		f, err := os.Open(filepath.Join(root, "testdata", "journals", name))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return replay.ReadJSONL(f)
	}
	approvals, err := read("approvals.jsonl")
	if err != nil {
		return err
	}
	crash, err := read("crash-loop.jsonl")
	if err != nil {
		return err
	}
	j, err := store.Open(path, &store.Options{NoSync: true})
	if err != nil {
		return err
	}
	ctx := context.Background()
	end := time.Now().Add(-24 * time.Hour)
	span := 90 * 24 * time.Hour
	for i := range sessions {
		tmpl := crash
		if i == 0 {
			tmpl = approvals
		}
		start := end.Add(-span + time.Duration(i)*span/time.Duration(max(sessions, 1)))
		evs := expandSession(tmpl, start, perSession)
		for len(evs) > 0 {
			n := min(len(evs), 4096)
			if _, err := j.Append(ctx, evs[0].Session, store.Any, evs[:n]); err != nil {
				j.Close()
				return err
			}
			evs = evs[n:]
		}
	}
	if err := j.Close(); err != nil {
		return err
	}
	// Durable before the rename publishes it.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// expandSession returns tmpl as a new session that starts at start: new
// session and event IDs, times shifted, and the template's call pairs
// repeated (new call IDs, 1 ms apart) before its first stop.requested
// until the session has about n events.
func expandSession(tmpl []events.Event, start time.Time, n int) []events.Event {
	sid := uuidV7At(start)
	shift := start.UnixNano() - tmpl[0].Time
	var calls []events.Event
	stop := len(tmpl)
	for i, e := range tmpl {
		switch e.Kind {
		case events.KindCallStarted, events.KindCallFinished:
			calls = append(calls, e)
		case events.KindStopRequested:
			if stop == len(tmpl) {
				stop = i
			}
		}
	}
	out := make([]events.Event, 0, max(n, len(tmpl)))
	seqOf := map[uint64]uint64{} // template seq → new seq
	add := func(e events.Event, t int64) {
		// Times inside payloads move with the event, so that the decider
		// decides the same on replay.
		switch p := e.Payload.(type) {
		case *events.TimerScheduled:
			cp := *p
			cp.FireAt += t - e.Time
			e.Payload = &cp
		case *events.ConfigObserved:
			cp := *p
			cp.Servers = slices.Clone(p.Servers)
			for i := range cp.Servers {
				c := &cp.Servers[i]
				c.RecentLaunches = slices.Clone(c.RecentLaunches)
				for k := range c.RecentLaunches {
					c.RecentLaunches[k] += t - e.Time
				}
				c.RecentCrashes = slices.Clone(c.RecentCrashes)
				for k := range c.RecentCrashes {
					c.RecentCrashes[k] += t - e.Time
				}
				if c.Approval.At != 0 {
					c.Approval.At += t - e.Time
				}
			}
			e.Payload = &cp
		}
		e.Session, e.ID, e.Seq, e.GPos, e.Time = sid, uuidV7At(time.Unix(0, t)), uint64(len(out)+1), 0, t
		out = append(out, e)
	}
	for _, e := range tmpl[:stop] {
		seqOf[e.Seq] = uint64(len(out) + 1)
		e.Cause = seqOf[e.Cause]
		add(e, e.Time+shift)
	}
	t := out[len(out)-1].Time
	for k := 0; len(calls) > 0 && len(out)+len(tmpl)-stop+len(calls) <= n; k++ {
		t += int64(time.Millisecond)
		callID := uuidV7At(time.Unix(0, t)).String()
		for _, c := range calls {
			c.Cause = 0
			switch p := c.Payload.(type) {
			case *events.CallStarted:
				cp := *p
				cp.CallID = callID
				c.Payload = &cp
			case *events.CallFinished:
				cp := *p
				cp.CallID = callID
				c.Payload = &cp
			}
			add(c, t)
		}
	}
	last := t - (tmpl[stop-1].Time + shift)
	for _, e := range tmpl[stop:] {
		seqOf[e.Seq] = uint64(len(out) + 1)
		e.Cause = seqOf[e.Cause]
		add(e, e.Time+shift+max(last, 0))
	}
	return out
}

// uuidV7At returns a random UUIDv7 whose timestamp is t, so that session
// IDs sort in the order of their sessions' starts.
func uuidV7At(t time.Time) uuid.UUID {
	var u uuid.UUID
	_, _ = rand.Read(u[:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(u[0:6], ms[2:8])
	u[6] = 0x70 | u[6]&0x0f
	u[8] = 0x80 | u[8]&0x3f
	return u
}
