package runtime

import (
	"time"

	"github.com/mcpledger/mcpledger/events"
)

// Relaxed records (call.started, call.finished and call.decided in Relaxed
// mode: nobody waits for them) are held, under procMu, by the loop or by a
// lone call's caller (submitDirect), and handed to the
// journal together, so that a stream of relaxed calls costs one commit per
// Options.RelaxedHold instead of one or two per call: on 2 cores each
// commit's CPU competes with the calls. The hold ends after RelaxedHold,
// at maxHeld events, at the next durable batch (which carries them first,
// in seq order), and in Shutdown. A crash loses at most the held records,
// which Relaxed allows: they were never acknowledged as durable.
const maxHeld = 256

// hold keeps relaxed records evs until the hold ends (see maxHeld).
func (m *Manager) hold(evs []events.Event) {
	if len(m.held) == 0 {
		m.heldSince = time.Now()
	}
	m.held = append(m.held, evs...)
	if len(m.held) >= maxHeld {
		m.flushHeld()
	}
}

// flushHeld hands the held relaxed records to the journal.
func (m *Manager) flushHeld() {
	if len(m.held) == 0 {
		return
	}
	m.lastLater = m.j.AppendLater(m.sid, m.held)
	m.flushed = append(m.flushed, m.held...)
	m.held = nil
}

// armHold returns the channel that fires when the held records are due,
// or nil when none are held.
func (m *Manager) armHold(t *time.Timer) <-chan time.Time {
	if len(m.held) == 0 {
		return nil
	}
	t.Reset(max(time.Until(m.heldSince.Add(m.opts.RelaxedHold)), 0))
	return t.C
}
