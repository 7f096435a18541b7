package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// ---- the journal refusing appends: degraded, retried, resumed ----
//
// An append that fails (disk full, an I/O error) puts the Manager in a
// degraded state instead of breaking it for good. Meanwhile:
//
//   - Nothing decided is acted on: the failed batch's decisions are
//     discarded with it, and no effect starts until the journal resumes.
//   - Commands and calls are refused with a *DegradedError that says why
//     and that the journal is retried; a call whose call.started cannot be
//     journaled is never sent, in either durability (see submit). Relaxed
//     calls are refused too: Relaxed trades when a record is durable, not
//     whether it is written, and a call run meanwhile would stay
//     unrecorded for the whole outage.
//   - Observations of the world (exits, handshakes, listings, timers, the
//     outcome of a call already sent, a relaxed call record) are kept, in
//     the order they arrived, up to maxBacklog (see keep). The caller of a
//     kept outcome gets no result, only the refusal: it is not durable.
//   - The loop retries the journal after journalRetryMin, doubling up to
//     journalRetryMax. A retry first settles what the journal holds of the
//     session (JournalHead): relaxed records handed over since the last
//     commit seen and not stored are kept too. It then appends
//     journal.resumed, then the kept observations, decided afresh on the
//     state the journal holds.
//
// A failed commit may still have reached the file (bbolt writes the meta
// page, then fsyncs: the fsync may fail after it). Then the journal holds
// records the Manager was told failed, whose decisions it never applied:
// no retry can make the two agree, and the kernel may have dropped those
// pages without writing them (a failed fsync does not keep them dirty).
// The Manager then stays refused for good and says to restart: the next
// Open reads the file as it is.

// Retry bounds for a failing journal.
const (
	journalRetryMin = 100 * time.Millisecond
	journalRetryMax = 5 * time.Second
)

// maxBacklog bounds the observations kept while the journal fails (a
// variable for tests).
var maxBacklog = 4096

// JournalHead is what the Manager needs, beyond Journal, to resume after a
// failed append: the last seq the journal holds of session (0 for none).
// A Journal without it is resumed on trust: the retry appends right after
// the last seq the Manager saw committed.
type JournalHead interface {
	LastSeq(ctx context.Context, session uuid.UUID) (uint64, error)
}

// JournalHealth is the journal's state as the Manager sees it, in every
// View: zero while appends succeed.
type JournalHealth struct {
	// Degraded is set while the journal refuses appends.
	Degraded bool `json:"degraded"`
	// Final is set when retrying cannot help (see DegradedError.Final).
	Final bool `json:"final,omitempty"`
	// Since is when the first append failed, Error why.
	Since time.Time `json:"since"`
	Error string    `json:"error"`
	// Attempts counts the retries made so far; NextRetry is when the next
	// one is due (zero when Final).
	Attempts  int       `json:"attempts"`
	NextRetry time.Time `json:"next_retry"`
	// Backlog counts the observations kept for the journal; Dropped those
	// past the bound.
	Backlog int `json:"backlog"`
	Dropped int `json:"dropped,omitempty"`
}

// DegradedError is the refusal of a command or call while the journal
// refuses appends. It wraps ErrJournal and the journal's error.
type DegradedError struct {
	Since     time.Time
	Err       error // the journal's first error
	NextRetry time.Time
	// Final: the journal holds records whose commit was reported failed;
	// this process cannot resume (restart it).
	Final bool
	// Kept: the refused input is an observation the Manager keeps and
	// journals when the journal resumes (a call's outcome, say).
	Kept bool
}

// Error says what failed, since when, and what happens next.
func (e *DegradedError) Error() string {
	if e.Final {
		return fmt.Sprintf("runtime: journal append failed (%v), and the journal holds records whose commit was reported failed, "+
			"so this process cannot know what reached the disk: it refuses all work; restart mcpledger, then run mcpledger verify", e.Err)
	}
	s := fmt.Sprintf("runtime: journal append failed since %s (%v): the manager is degraded and refuses new work; "+
		"it retries the journal (next in %s) and resumes by itself once it can write (free disk space); mcpledger status shows it",
		e.Since.Format("15:04:05"), e.Err, max(time.Until(e.NextRetry), 0).Round(time.Millisecond))
	if e.Kept {
		s += "; this outcome is kept and journaled when it resumes"
	}
	return s
}

// Unwrap makes errors.Is(err, ErrJournal) true, and the journal's error
// reachable.
func (e *DegradedError) Unwrap() []error { return []error{ErrJournal, e.Err} }

// outage is the Manager's record of a failing journal, owned by the holder
// of procMu.
type outage struct {
	since     time.Time
	err       error // the first failure
	attempts  int
	next      time.Time
	final     bool
	backlog   []*request // observations to journal on resume, in arrival order
	dropped   int        // past maxBacklog
	coalesced int        // listings superseded by a later one
	// lostRelaxed counts relaxed records the journal did not store and
	// the Manager no longer holds.
	lostRelaxed int
}

// refusal returns the error a refused input gets.
func (o *outage) refusal(kept bool) error {
	return &DegradedError{Since: o.since, Err: o.err, NextRetry: o.next, Final: o.final, Kept: kept}
}

// keep adds r, an observation, to the backlog. A listing (tools,
// resources, prompts) replaces the server's earlier one of its kind, which
// it supersedes: it is counted as coalesced and moves to the end, so that
// a server that keeps announcing changes holds one place. Past maxBacklog
// r is dropped and counted; lifecycle observations cannot get there (a
// connection reports its end once, and no connection starts meanwhile),
// so what is dropped is a flood of one kind (ping failures, say).
func (o *outage) keep(r *request) {
	if listing(r.ev.Kind) {
		if i := slices.IndexFunc(o.backlog, func(b *request) bool { return b.ev.Kind == r.ev.Kind && b.ev.Server == r.ev.Server }); i >= 0 {
			o.backlog = slices.Delete(o.backlog, i, i+1)
			o.coalesced++
		}
	}
	if len(o.backlog) >= maxBacklog {
		o.dropped++
		return
	}
	o.backlog = append(o.backlog, &request{ev: r.ev, durable: true, conn: r.conn})
}

// listing reports whether kind is a listing a later one supersedes.
func listing(kind events.Kind) bool {
	return kind == events.KindToolsListed || kind == events.KindResourcesListed || kind == events.KindPromptsListed
}

// keptErr is refusal err (a *DegradedError) for an input that is kept.
func keptErr(err error) error {
	if de, ok := err.(*DegradedError); ok {
		kept := *de
		kept.Kept = true
		return &kept
	}
	return err
}

// observation reports whether r records something that happened in the
// world and must reach the journal even if it arrives while the journal
// fails: everything but the commands a caller can repeat, and an audited
// call.started (its call is not sent).
func observation(r *request) bool {
	if r.noEvent || r.prepare != nil || r.check != nil {
		return false // commands with work on the loop: config readings, barriers
	}
	switch r.ev.Kind {
	case events.KindSessionStarted, events.KindStopRequested, events.KindConfigObserved,
		events.KindApprovalDecided, events.KindReconnectRequested, events.KindCallDecided:
		return false
	case events.KindCallStarted:
		return !r.durable // relaxed: queued, and the call is on its way
	}
	return true
}

// degrade enters (or extends) the outage after an append of batch failed
// with err; held are the relaxed records that append carried (those still
// held join them), and errs the batch's own refusals (by the decider).
// Observations are kept, every waiting caller is refused.
func (m *Manager) degrade(err error, batch []*request, errs []result, held []events.Event) {
	if m.lastLater != nil { // a relaxed commit that failed first is the cause
		if lerr := m.lastLaterErr(); lerr != nil {
			err = lerr
		}
	}
	if m.deg == nil {
		now := time.Now()
		m.deg = &outage{since: now, err: err, next: now.Add(journalRetryMin)}
		m.log.Error("journal append failed; refusing work and retrying", "err", err)
		select { // a direct submitter's failure: the loop must arm the retry
		case m.wake <- struct{}{}:
		default:
		}
	}
	// The held records' seqs were taken, the last ones: they are
	// journaled afresh, after journal.resumed.
	held, m.held = append(held, m.held...), nil
	m.lastSeq -= uint64(len(held))
	for _, e := range held {
		m.deg.keep(&request{ev: events.Event{Kind: e.Kind, Server: e.Server, Payload: e.Payload}})
	}
	m.refuseAll(batch, errs)
}

// refuseDegraded answers a batch that arrived while the journal fails:
// observations are kept, callers are refused, and then the barriers run
// (they journal nothing; one may resume the journal: see lastRetry).
func (m *Manager) refuseDegraded(batch []*request) {
	m.refuseAll(batch, nil)
	for _, r := range batch {
		if r.noEvent && r.prepare != nil {
			r.prepare()
		}
	}
}

// refuseAll keeps the observations of batch, publishes the outage, and only
// then answers the callers (one that waits for the journal to resume sees
// it failing). errs, if not nil, holds the decider's own refusals, which
// their callers get instead.
func (m *Manager) refuseAll(batch []*request, errs []result) {
	kept := make([]bool, len(batch))
	for i, r := range batch {
		if r.noEvent || errs != nil && errs[i].err != nil {
			continue
		}
		if kept[i] = observation(r); kept[i] {
			m.deg.keep(r)
		}
	}
	m.setDegraded()
	for i, r := range batch {
		switch {
		case r.reply == nil:
		case errs != nil && errs[i].err != nil:
			r.reply <- errs[i] // refused by the decider: never for the journal
		default:
			r.reply <- result{err: m.deg.refusal(kept[i])}
		}
	}
}

// laterFailed returns the error of the last relaxed append if it has
// failed, without waiting: a relaxed flush that failed degrades the
// Manager before the next batch, so that relaxed calls are refused too.
func (m *Manager) laterFailed() error {
	if m.lastLater == nil {
		return nil
	}
	err := m.lastLater(endedCtx)
	switch {
	case errors.Is(err, context.Canceled) && endedCtx.Err() == err:
		return nil // still pending
	case err == nil:
		m.flushed = nil // committed, and every append before it
	}
	return err
}

// endedCtx is a context that has ended: waiting with it only reads an
// outcome that is already there.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// lastLaterErr returns the error of the last relaxed append, waiting for
// it a little: nil if it committed or is still pending.
func (m *Manager) lastLaterErr() error {
	ctx, cancel := context.WithTimeout(m.ctx, time.Second)
	defer cancel()
	err := m.lastLater(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// setDegraded publishes the outage: the journal error for submit's
// unlocked check, and a View with the journal's health.
func (m *Manager) setDegraded() {
	err := m.deg.refusal(false)
	m.journalErr.Store(&err)
	v := *m.view.Load()
	v.Journal = JournalHealth{Degraded: true, Final: m.deg.final, Since: m.deg.since, Error: m.deg.err.Error(),
		Attempts: m.deg.attempts, NextRetry: m.deg.next, Backlog: len(m.deg.backlog), Dropped: m.deg.dropped}
	if m.deg.final {
		v.Journal.NextRetry = time.Time{}
	}
	m.publish(&v)
}

// armRetry returns the channel that fires when the journal is due for a
// retry, or nil when it is healthy (or beyond help).
func (m *Manager) armRetry(t *time.Timer) <-chan time.Time {
	if m.deg == nil || m.deg.final {
		return nil
	}
	t.Reset(max(time.Until(m.deg.next), 0))
	return t.C
}

// retryJournal tries to resume the journal: it settles what the journal
// holds of the session, appends journal.resumed, and then the backlog.
// On failure it schedules the next retry.
func (m *Manager) retryJournal() {
	o := m.deg
	o.attempts++
	fail := func(err error) {
		o.next = time.Now().Add(retryDelay(o.attempts))
		m.log.Warn("journal still failing", "err", err, "attempts", o.attempts, "next_in", time.Until(o.next).Round(time.Millisecond))
		m.setDegraded()
	}
	ctx, cancel := context.WithTimeout(m.ctx, journalRetryMax)
	defer cancel()
	if m.lastLater != nil {
		// Settle it first: what it stored, if anything, is read below.
		if _ = m.lastLater(ctx); ctx.Err() != nil {
			fail(fmt.Errorf("waiting for the last relaxed append: %w", ctx.Err()))
			return
		}
	}
	var relaxed []*request // relaxed records handed over and not stored
	if h, ok := m.j.(JournalHead); ok {
		last, err := h.LastSeq(ctx, m.sid)
		switch {
		case err != nil:
			fail(err)
			return
		case last > m.lastSeq:
			o.final = true
			m.log.Error("the journal holds records whose commit failed; restart mcpledger", "journal_seq", last, "seq", m.lastSeq)
			m.setDegraded()
			return
		case last < m.lastSeq:
			// Only relaxed call records ride without a durable answer:
			// those handed over since the last commit seen are kept,
			// ahead of the backlog (they happened first); any other is
			// counted as lost.
			for _, e := range m.flushed {
				if e.Seq > last {
					relaxed = append(relaxed, &request{ev: events.Event{Kind: e.Kind, Server: e.Server, Payload: e.Payload}, durable: true})
				}
			}
			o.lostRelaxed += int(m.lastSeq-last) - len(relaxed)
			m.lastSeq = last
		}
	}
	m.flushed = nil
	now := time.Now()
	o.backlog = append(relaxed, o.backlog...)
	e := events.Event{Session: m.sid, Seq: m.lastSeq + 1, ID: events.NewID(), Time: now.UnixNano(), Kind: events.KindJournalResumed,
		Payload: &events.JournalResumed{Since: o.since.UnixNano(), Until: now.UnixNano(), Error: o.err.Error(), Attempts: o.attempts,
			Backlog: len(o.backlog), Coalesced: o.coalesced, Dropped: o.dropped, LostRelaxed: o.lostRelaxed}}
	if err := m.j.Append(ctx, m.sid, []events.Event{e}); err != nil {
		fail(err)
		return
	}
	m.lastLater = nil // settled above
	m.log.Info("journal resumed", "since", o.since, "attempts", o.attempts, "backlog", len(o.backlog), "dropped", o.dropped, "lost_relaxed", o.lostRelaxed)
	m.lastSeq++
	m.set.Apply(e)
	m.deg = nil
	m.journalErr.Store(nil)
	backlog := o.backlog
	for len(backlog) > 0 && m.deg == nil {
		n := min(len(backlog), maxBatch)
		m.process(backlog[:n])
		backlog = backlog[n:]
	}
	if m.deg != nil { // failed again: what is left stays behind what failed
		for _, r := range backlog {
			m.deg.keep(r)
		}
		m.setDegraded()
		return
	}
	m.publish(buildView(m.sid, m.lastSeq, m.set, m.conns, m.state))
}

// awaitJournal waits until the journal takes appends again. It reports
// false if ctx ends first, or the Manager cannot resume (Final).
func (m *Manager) awaitJournal(ctx context.Context) bool {
	views, cancel := m.Subscribe()
	defer cancel()
	for {
		select {
		case v := <-views:
			switch {
			case !v.Journal.Degraded:
				return true
			case v.Journal.Final:
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// lastRetry retries a failing journal at once, on the loop, before
// Shutdown journals the stop: space may have come back since the last
// retry.
func (m *Manager) lastRetry() {
	if m.deg != nil && !m.deg.final {
		m.retryJournal()
	}
}

// retryDelay is the wait before retry attempt+1.
func retryDelay(attempts int) time.Duration {
	d := journalRetryMin
	for i := 1; i < attempts && d < journalRetryMax; i++ {
		d *= 2
	}
	return min(d, journalRetryMax)
}

// errDegraded returns the refusal for a command while the journal fails,
// or nil. The holder of procMu calls it.
func (m *Manager) errDegraded() error {
	if m.deg == nil {
		return nil
	}
	return m.deg.refusal(false)
}
