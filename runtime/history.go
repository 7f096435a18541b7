package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
)

// CheckpointJournal is a [Journal] that keeps checkpoints of
// [projections.History], the fold of earlier sessions (*store.Journal does,
// through the same adapter). With one, Start folds only the events after
// the newest usable checkpoint instead of the whole journal, and the
// Manager saves a new checkpoint once [CheckpointEvery] events have
// followed the last one. Without one, Start folds everything.
type CheckpointJournal interface {
	Journal
	// Checkpoints returns the stored checkpoints, oldest first; a damaged
	// one has Err set.
	Checkpoints(ctx context.Context) ([]projections.Stored, error)
	// SaveCheckpoint hands over a checkpoint of the fold up to gpos, to be
	// written with the next commit (never delaying it by a commit of its
	// own).
	SaveCheckpoint(gpos uint64, data []byte) error
}

// CheckpointEvery is the default of Options.CheckpointEvery: how many
// events may follow the newest checkpoint before the Manager saves
// another, at Start when the fold it did had that many, and at Close when
// this session brought the count there. Start then folds at most about
// this many events beyond the last session's own.
const CheckpointEvery = 4096

// history is what earlier sessions in the journal tell a new one.
type history struct {
	crashes  map[string][]int64 // server → crash times (unix ns) in the storm window, since its last explicit reconnect
	previous string             // an earlier session that never stopped
	// uncovered counts the events after the newest checkpoint at Start
	// (the fold's tail, and a closed interrupted session); mark is the
	// count, uncovered plus this session's seq, when the Manager last
	// asked for a checkpoint. The loop owns both.
	uncovered, mark int
}

// LoadHistory returns the fold of j's events, resuming from the newest
// usable checkpoint when j keeps them, and the number of events it folded
// (those after the checkpoint). before, when not 0, asks for the fold up
// to (not including) that global position, from a checkpoint below it.
// Each checkpoint passed over is given to skipped (nil: ignored) with
// why: damaged, another version of the fold, or malformed.
func LoadHistory(ctx context.Context, j Journal, before uint64, skipped func(error)) (*projections.History, int, error) {
	h := projections.NewHistory()
	if cj, ok := j.(CheckpointJournal); ok {
		cps, err := cj.Checkpoints(ctx)
		if err != nil {
			return nil, 0, err
		}
		var passed []error
		h, passed, err = projections.Resume(cps, before)
		for _, err := range passed {
			if skipped != nil {
				skipped(err)
			}
		}
		if err != nil {
			return nil, 0, err
		}
	}
	n := 0
	err := j.ReadAll(ctx, h.GPos+1, func(e events.Event) error {
		if before != 0 && e.GPos >= before {
			return errStopRead
		}
		h.Apply(e)
		n++
		return nil
	})
	if err != nil && !errors.Is(err, errStopRead) {
		return nil, 0, err
	}
	return h, n, nil
}

var errStopRead = errors.New("runtime: stop reading")

// loadHistory folds the journal's earlier sessions into the projections,
// from the newest usable checkpoint on: the tool cache and approvals,
// recent crashes per server for the storm breaker, and a previous
// session that never stopped, which it closes (see closeInterrupted).
func (m *Manager) loadHistory(ctx context.Context) error {
	h, tail, err := LoadHistory(ctx, m.j, 0, func(err error) {
		if errors.Is(err, projections.ErrHistoryVersion) {
			m.log.Info("checkpoint of another version ignored; folding the journal instead", "err", err)
			return
		}
		m.log.Warn("checkpoint unusable; folding the journal from before it instead (run mcpledger verify)", "err", err)
	})
	if err != nil {
		return err
	}
	if cj, ok := m.j.(CheckpointJournal); ok && m.opts.CheckpointEvery > 0 && tail >= m.opts.CheckpointEvery {
		if err := cj.SaveCheckpoint(h.GPos, h.Encode()); err != nil {
			m.log.Warn("checkpoint not saved", "err", err)
		} else {
			tail = 0
		}
	}
	now := m.opts.Now().UnixNano()
	window := fsm.WithDefaults(m.opts.Decider).StormWindowMs * 1e6
	hist := history{crashes: map[string][]int64{}, uncovered: tail}
	for _, s := range h.Sessions() {
		for _, name := range s.Servers {
			if _, done := hist.crashes[name]; done {
				continue
			}
			hist.crashes[name] = nil
			for _, t := range h.Crashes(name) {
				if now-t < window && t <= now {
					hist.crashes[name] = append(hist.crashes[name], t)
				}
			}
		}
	}
	m.set = projections.NewSetFrom(h)
	if last, ok := h.Last(); ok && !last.Stopped {
		hist.previous = last.Session
	}
	m.history = hist
	if cj, ok := m.j.(CheckpointJournal); ok && m.opts.CheckpointEvery > 0 {
		m.cpDue = make(chan int, 1)
		m.goFunc(func() { m.checkpointer(cj) })
	}
	if hist.previous != "" {
		last, _ := h.Last()
		if err := m.closeInterrupted(ctx, last, now); err != nil {
			return fmt.Errorf("close interrupted session %s: %w", last.Session, err)
		}
	}
	return nil
}

// closeInterrupted records that session last ended without stopping (its
// mcpledger was killed): it appends to that session a stop.requested with
// reason interrupted and the decisions the decider makes for it, so the
// session reads as ended and still replays. Process groups of that session
// whose leader is gone but whose members survived are killed; a group whose
// leader pid exists is left alone (the pid may have been reused).
func (m *Manager) closeInterrupted(ctx context.Context, last projections.SessionSummary, now int64) error {
	sid := uuid.MustParse(last.Session)
	var st fsm.State
	var lastSeq uint64
	pgids := map[string]int{} // the session's live process groups by server
	var open []events.Event   // calls started and not finished, in order
	err := m.j.ReadAll(ctx, last.FirstGPos, func(e events.Event) error {
		if e.Session != sid {
			return nil
		}
		st, lastSeq = fsm.Evolve(st, e), e.Seq
		switch p := e.Payload.(type) {
		case *events.ProcessSpawned:
			pgids[e.Server] = p.PGID
		case *events.ProcessExited:
			delete(pgids, e.Server)
		case *events.CallStarted:
			open = append(open, e)
		case *events.CallFinished:
			open = slices.DeleteFunc(open, func(s events.Event) bool { return s.Payload.(*events.CallStarted).CallID == p.CallID })
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, pgid := range pgids {
		if pgid > 0 {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pgid)); os.IsNotExist(err) {
				_ = killGroup(pgid)
			}
		}
	}
	out := lostCalls(open, lastSeq, now)
	for _, e := range out {
		st = fsm.Evolve(st, e)
	}
	seq := lastSeq + uint64(len(out))
	in := events.Event{Session: sid, Seq: seq + 1, Time: now, Kind: events.KindStopRequested, ID: events.NewID(),
		Payload: &events.StopRequested{Reason: events.ReasonInterrupted, By: "the next session, " + m.sid.String()}}
	decs, err := fsm.Decide(st, in)
	if err != nil {
		return err
	}
	out = append(out, in)
	for _, d := range decs {
		d.Seq, d.ID = lastSeq+uint64(len(out))+1, events.NewID()
		out = append(out, d)
	}
	if err := m.j.Append(ctx, sid, out); err != nil {
		return err
	}
	m.history.uncovered += len(out)
	for _, e := range out {
		m.set.Apply(e)
	}
	return nil
}

// LostCallError is the error text of the call.finished (outcome lost)
// that closes a call an interrupted session left without an outcome.
const LostCallError = "mcpledger was killed with the call in flight: whether the server ran it is unknown (recorded by the next session)"

// lostCalls returns a call.finished of outcome lost for each call in
// open (call.started events without an outcome), numbered after seq, at
// now: their mcpledger was killed with them in flight.
func lostCalls(open []events.Event, seq uint64, now int64) []events.Event {
	out := make([]events.Event, 0, len(open))
	for _, s := range open {
		seq++
		out = append(out, events.Event{Session: s.Session, Seq: seq, Time: now, Kind: events.KindCallFinished, ID: events.NewID(),
			Server: s.Server, Payload: &events.CallFinished{CallID: s.Payload.(*events.CallStarted).CallID,
				Outcome: events.OutcomeLost, Error: LostCallError}})
	}
	return out
}

// checkpointDue, on the loop after an append, wakes the checkpointer
// once CheckpointEvery events have followed the last checkpoint asked for.
func (m *Manager) checkpointDue() {
	n := m.history.uncovered + int(m.lastSeq)
	if m.cpDue == nil || n-m.history.mark < m.opts.CheckpointEvery {
		return
	}
	m.history.mark = n
	select {
	case m.cpDue <- n:
	default: // one is being made: it will cover these too
	}
}

// checkpointer runs while the session does (a goroutine of the Manager):
// when the loop says one is due, it folds the journal from its newest
// checkpoint, in read transactions that never hold up an append, and
// hands the fold to the journal, which writes it with its next commit.
func (m *Manager) checkpointer(cj CheckpointJournal) {
	for {
		var n int
		select {
		case <-m.ctx.Done():
			return
		case n = <-m.cpDue:
		}
		h, _, err := LoadHistory(m.ctx, m.j, 0, nil)
		if err == nil {
			err = cj.SaveCheckpoint(h.GPos, h.Encode())
		}
		if err == nil {
			m.cpSaved.Store(int64(n))
		} else if m.ctx.Err() == nil {
			m.log.Warn("checkpoint not saved", "err", err)
		}
	}
}

// saveCheckpoint, at Close, saves a checkpoint of the journal's fold when
// CheckpointEvery events followed the last one saved, or one asked for
// was not saved. The journal writes it at its own close.
func (m *Manager) saveCheckpoint(ctx context.Context) {
	cj, ok := m.j.(CheckpointJournal)
	if !ok || m.opts.CheckpointEvery <= 0 {
		return
	}
	saved := int(m.cpSaved.Load())
	if m.history.mark == saved && m.history.uncovered+int(m.lastSeq)-saved < m.opts.CheckpointEvery {
		return
	}
	h, _, err := LoadHistory(ctx, m.j, 0, nil)
	if err == nil {
		err = cj.SaveCheckpoint(h.GPos, h.Encode())
	}
	if err != nil {
		m.log.Warn("checkpoint not saved", "err", err)
	}
}
