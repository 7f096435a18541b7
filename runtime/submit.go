package runtime

import (
	"context"

	"github.com/mcpledger/mcpledger/events"
)

// How inputs reach the loop: a command waits for its result, an
// observation is posted, and a lone call's records are decided on the
// caller's goroutine (submitDirect) when the loop is idle.

// submit sends payload p about server to the loop as an input and waits
// for the result (durable first when durable is true).
//
// A record that need not be durable (a call record in Relaxed mode) is only
// held (submitDirect) or queued: it is journaled in order with a later
// batch, and the caller does not wait for that.
func (m *Manager) submit(ctx context.Context, server string, p events.Payload, durable bool) (result, error) {
	r := &request{ev: events.Event{Kind: p.Kind(), Server: server, Payload: p}, durable: durable}
	if !durable {
		if !m.started.Load() {
			return result{}, ErrNotStarted
		}
		jerr := m.journalErr.Load()
		if jerr != nil && r.ev.Kind != events.KindCallFinished { // degraded: the call must not be sent
			return result{}, *jerr
		}
		if jerr == nil && m.submitDirect(r) {
			return result{}, nil
		}
		m.queued.Add(1)
		select {
		case m.inbox <- r:
			if jerr != nil { // the outcome of a call sent: kept for the journal, withheld from the caller
				return result{}, keptErr(*jerr)
			}
			return result{}, nil
		case <-m.loopDone:
		case <-ctx.Done():
		}
		m.queued.Add(-1)
		if ctx.Err() != nil {
			return result{}, ctx.Err()
		}
		return result{}, ErrShuttingDown
	}
	return m.submitReq(ctx, r)
}

func (m *Manager) submitReq(ctx context.Context, r *request) (result, error) {
	if !m.started.Load() {
		return result{}, ErrNotStarted
	}
	r.reply = make(chan result, 1)
	if m.submitDirect(r) {
		res := <-r.reply
		return res, res.err
	}
	m.queued.Add(1)
	select {
	case m.inbox <- r:
	case <-m.loopDone:
		m.queued.Add(-1)
		return result{}, ErrShuttingDown
	case <-ctx.Done():
		m.queued.Add(-1)
		return result{}, ctx.Err()
	}
	select {
	case res := <-r.reply:
		return res, res.err
	case <-m.loopDone:
		return result{}, ErrShuttingDown
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
}

// submitDirect decides r, a call record, on the caller's goroutine when
// the loop is idle: nothing queued, procMu free. A durable record is
// journaled there (its result is then in r.reply); a relaxed one is held
// (see maxHeld). It reports whether it did.
//
// A hand-off to the loop costs a goroutine wake-up, and on a VM each can
// cost tens of microseconds (a futex wake of an idle thread): twice per
// call, for its two records, and twice more for an audited call's
// answers; the store's Journal.direct skips its writer the same way.
// Order is kept: an input queued before r (counted in queued until the
// loop has processed it) sends r through the loop too. Call records are
// facts that decide nothing (fsm.Decide) and start no effects; the one
// timer they need, the hold's, the loop arms when it is woken (m.wake)
// by the record that starts a hold.
//
// Only a lone call's records go direct. With other calls in flight, a
// durable record's commit of one would hold procMu through its fsync
// while theirs queue, where the loop's batches (see linger) share one
// commit among all that queued; and relaxed records, which cost no
// commit, would contend for procMu where the loop decides them in
// batches (sent direct at any concurrency they cost the gateway 4 %
// more CPU per call at c=16; a lone call's, direct, saved 2 % of its CPU
// and p50 at c=1 in 8 quiet rounds, BENCHMARKS.md "Gateway").
func (m *Manager) submitDirect(r *request) bool {
	if r.prepare != nil || r.check != nil || r.noEvent || !isCallRecord(r.ev.Kind) ||
		m.queued.Load() != 0 || m.inCalls.Load() > 1 || !m.procMu.TryLock() {
		return false
	}
	defer m.procMu.Unlock()
	if m.loopEnded || m.queued.Load() != 0 {
		return false
	}
	held := len(m.held)
	m.process([]*request{r})
	if held == 0 && len(m.held) > 0 {
		select { // the loop arms the hold's timer
		case m.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// isCallRecord reports whether kind is a call record that decides nothing.
func isCallRecord(kind events.Kind) bool {
	return kind == events.KindCallStarted || kind == events.KindCallFinished
}

// post sends an observation without waiting for it. It never blocks once
// the loop has ended.
func (m *Manager) post(r *request) {
	m.queued.Add(1)
	select {
	case m.inbox <- r:
	case <-m.loopDone:
		m.queued.Add(-1)
	}
}

// observe posts an observation from connection c.
func (m *Manager) observe(c *conn, p events.Payload) {
	c.redactor().Scrub(p)
	m.post(&request{ev: events.Event{Kind: p.Kind(), Server: c.server, Payload: p}, durable: true, conn: c})
}
