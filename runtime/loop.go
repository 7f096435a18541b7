package runtime

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

// maxBatch bounds how many waiting inputs one commit takes.
const maxBatch = 256

// loop is the one goroutine that owns the decider state, the projections,
// the connections and the timers.
func (m *Manager) loop() {
	defer close(m.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	hold := time.NewTimer(time.Hour)
	defer hold.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		m.procMu.Lock()
		m.armTimer(timer)
		holdC := m.armHold(hold)
		retryC := m.armRetry(retry)
		m.procMu.Unlock()
		var batch []*request
		received := 0 // of batch, the requests taken from inbox
		timerDue, holdDue, retryDue := false, false, false
		select {
		case r := <-m.inbox:
			batch = m.linger(m.drain(append(batch, r)), linger)
			received = len(batch)
		case <-timer.C:
			timerDue = true
		case <-holdC:
			holdDue = true
		case <-retryC:
			retryDue = true
		case <-m.wake:
			continue // re-arm: a direct submitter started a hold, or its append failed
		case <-m.ctx.Done():
			m.procMu.Lock()
			m.flushHeld()
			m.loopEnded = true
			m.procMu.Unlock()
			m.failWaiting()
			return
		}
		m.procMu.Lock()
		if received > 0 {
			// Requests that came while a direct submitter held procMu
			// (an audited call's commit, with its fsync) join this batch
			// and share its commit, rather than wait for the next.
			batch = m.drain(batch)
			received = len(batch)
		}
		switch {
		case timerDue:
			batch = m.dueTimers()
		case holdDue:
			m.flushHeld()
		case retryDue:
			m.retryJournal()
		}
		if len(batch) > 0 {
			m.process(batch)
		}
		m.queued.Add(int64(-received))
		m.procMu.Unlock()
	}
}

// callLinger bounds how long the loop waits for audited call records to
// gather before it commits them (see linger).
const callLinger = 300 * time.Microsecond

// linger waits, at most callLinger, for more durable call records to join
// batch when the last durable commit shared several and other calls are
// in flight: under concurrent audited calls each commit's fsync then
// serves more of them (the store's writer lingers the same way, but the
// Manager is its only appender). A lone call never waits.
func (m *Manager) linger(batch []*request, t *time.Timer) []*request {
	want := int(m.lastShared.Load())
	if want < 2 || len(batch) >= want || m.inCalls.Load() <= int64(len(batch)) {
		return batch
	}
	durable := false
	for _, r := range batch {
		durable = durable || r.durable && isCallRecord(r.ev.Kind)
	}
	if !durable {
		return batch
	}
	t.Reset(callLinger)
	defer t.Stop()
	for len(batch) < want && len(batch) < maxBatch {
		select {
		case r := <-m.inbox:
			batch = append(batch, r)
		case <-t.C:
			return m.drain(batch)
		case <-m.ctx.Done():
			return batch
		}
	}
	return batch
}

// drain adds to batch what waits in the inbox, up to maxBatch.
func (m *Manager) drain(batch []*request) []*request {
	for len(batch) < maxBatch {
		select {
		case r := <-m.inbox:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// failWaiting answers every request still queued when the loop ends.
func (m *Manager) failWaiting() {
	for {
		select {
		case r := <-m.inbox:
			m.queued.Add(-1)
			if r.reply != nil {
				r.reply <- result{err: ErrShuttingDown}
			}
		default:
			return
		}
	}
}

// process decides a batch of inputs, appends them with their decisions in
// one commit, applies them, publishes the view, starts effects, and
// answers the requests.
func (m *Manager) process(batch []*request) {
	if m.deg == nil {
		if err := m.laterFailed(); err != nil {
			m.degrade(err, nil, nil, nil)
		}
	}
	if m.deg != nil {
		m.refuseDegraded(batch)
		return
	}
	specs := m.specs // a config reading's prepare replaces them: restored if the batch fails
	// Call records change no decider state (fsm.Evolve ignores them), so
	// a batch of only those decides on m.state itself: the clone, of every
	// server's state, is made only before the first other input.
	scratch, cloned := m.state, false
	seq := m.lastSeq
	var out []events.Event
	durable := false
	results := make([]result, len(batch))
	spans := make([][2]int, len(batch))
	for i, r := range batch {
		if r.prepare != nil {
			r.prepare()
		}
		if r.noEvent {
			spans[i] = [2]int{-1, -1}
			continue
		}
		if r.check != nil {
			if err := r.check(); err != nil {
				results[i].err = err
				spans[i] = [2]int{-1, -1}
				continue
			}
		}
		in := r.ev
		in.Session = m.sid
		if in.Time == 0 {
			in.Time = m.opts.Now().UnixNano()
		}
		in.Seq = seq + 1
		in.ID = events.NewID()
		if !cloned && !isCallRecord(in.Kind) {
			scratch, cloned = scratch.Clone(), true
		}
		decs, err := fsm.Decide(scratch, in)
		if err != nil {
			results[i].err = err // a refused command is not journaled
			spans[i] = [2]int{-1, -1}
			continue
		}
		seq++
		start := len(out)
		scratch = fsm.Evolve(scratch, in)
		out = append(out, in)
		for _, d := range decs {
			seq++
			d.Seq, d.ID = seq, events.NewID()
			scratch = fsm.Evolve(scratch, d)
			out = append(out, d)
		}
		spans[i] = [2]int{start, len(out)}
		durable = durable || r.durable
	}
	if len(out) > 0 {
		var err error
		var held []events.Event
		if durable {
			evs := out
			if len(m.held) > 0 { // the held records come first, in seq order
				held, m.held = m.held, nil
				evs = append(held, out...)
			}
			err = m.j.Append(m.ctx, m.sid, evs)
			m.lastShared.Store(int64(len(batch)))
		} else {
			m.hold(out)
		}
		if err != nil {
			// Nothing of the batch is applied or acted on: its
			// observations wait for the journal, its callers are refused.
			m.specs = specs
			m.degrade(err, batch, results, held)
			return
		}
		if durable {
			m.flushed = nil // the journal holds every seq before this batch's
		}
	}
	m.state, m.lastSeq = scratch, seq
	m.checkpointDue()
	for _, e := range out {
		m.set.Apply(e)
	}
	for i, r := range batch {
		if sp := spans[i]; sp[0] >= 0 {
			results[i].events = out[sp[0]:sp[1]]
			m.effects(r, out[sp[0]:sp[1]])
		}
	}
	// Call records change neither status nor catalog: a batch of only
	// those publishes no new View (rebuilding it costs milliseconds with
	// thousands of tools, on every call).
	if viewChanged(out) {
		m.publish(buildView(m.sid, m.lastSeq, m.set, m.conns, m.state))
	}
	for i, r := range batch {
		if r.reply != nil {
			r.reply <- results[i]
		}
	}
}

// viewChanged reports whether evs may change status, catalog or the
// promptable set: anything but call records.
func viewChanged(evs []events.Event) bool {
	for _, e := range evs {
		switch e.Kind {
		case events.KindCallStarted, events.KindCallFinished, events.KindCallDecided:
		default:
			return true
		}
	}
	return false
}

// effects starts what the journaled events call for. evs is one input
// followed by its decisions.
func (m *Manager) effects(r *request, evs []events.Event) {
	for _, e := range evs {
		switch p := e.Payload.(type) {
		case *events.ServerTransitioned:
			switch p.To {
			case events.StateLaunching:
				m.launch(e.Server, p.Attempt)
			case events.StateReady:
				if c := m.conns[e.Server]; c != nil && c.attempt == p.Attempt {
					c.becameReady()
				}
			case events.StateReconnecting, events.StateFailed:
				m.dropConn(e.Server, false)
			case events.StateStopped:
				m.dropConn(e.Server, true)
			}
		case *events.TimerScheduled:
			if m.world != nil {
				m.world.timer(p.TimerID)
				continue
			}
			heap.Push(&m.timers, &timerEntry{at: time.Unix(0, p.FireAt), server: e.Server,
				id: p.TimerID, purpose: p.Purpose, attempt: p.Attempt})
		}
	}
}

// launch starts connection attempt attempt of server.
func (m *Manager) launch(server string, attempt int) {
	if m.world != nil {
		m.world.launch(server, attempt)
		return
	}
	m.dropConn(server, false)
	spec, ok := m.specs[server]
	if !ok {
		// Decided to launch a server whose spec we lost: report it as a
		// failed spawn so the decider backs off.
		c := &conn{m: m, server: server, attempt: attempt}
		m.goFunc(func() {
			m.observe(c, &events.ConnectFailed{Attempt: attempt, Phase: "spawn",
				Error: events.ClassifiedError{Class: events.ErrSpawn, Message: "no resolved config for this server"}})
		})
		return
	}
	c := newConn(m, server, attempt, spec)
	c.known = m.knownVersion(server, &spec)
	m.conns[server] = c
	m.goFunc(c.run)
}

// dropConn tears down server's current connection, gracefully (stop) or
// at once (a failure: the session is already broken).
func (m *Manager) dropConn(server string, graceful bool) {
	c := m.conns[server]
	if c == nil {
		return
	}
	delete(m.conns, server)
	m.teardown.Add(1)
	m.goFunc(func() {
		defer m.teardown.Done()
		c.shutdown(graceful)
	})
}

// Timers: the loop keeps scheduled timers in a heap and waits for the
// earliest one itself, so no goroutine outlives a timer.

type timerEntry struct {
	at      time.Time
	server  string
	id      uint64
	purpose string
	attempt int
}

type timerHeap []*timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(*timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (m *Manager) armTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	if len(m.timers) == 0 {
		t.Reset(time.Hour)
		return
	}
	t.Reset(max(time.Until(m.timers[0].at), 0))
}

// dueTimers pops every timer that is due and returns a timer.fired input
// for each.
func (m *Manager) dueTimers() []*request {
	var out []*request
	now := time.Now()
	for len(m.timers) > 0 && !m.timers[0].at.After(now) {
		te := heap.Pop(&m.timers).(*timerEntry)
		out = append(out, &request{ev: events.Event{Kind: events.KindTimerFired, Server: te.server,
			Payload: &events.TimerFired{TimerID: te.id, Purpose: te.purpose, Attempt: te.attempt}}, durable: true})
	}
	return out
}

// onLoop runs f on the loop goroutine and waits for it. It reports false if
// the loop has ended.
func (m *Manager) onLoop(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	r := &request{prepare: func() { f(); close(done) }, noEvent: true}
	m.queued.Add(1)
	select {
	case m.inbox <- r:
	case <-m.loopDone:
		m.queued.Add(-1)
		return false
	case <-ctx.Done():
		m.queued.Add(-1)
		return false
	}
	select {
	case <-done:
		return true
	case <-m.loopDone:
		return false
	case <-ctx.Done():
		return false
	}
}

func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func sortServers(s []events.ServerConfig) {
	slices.SortFunc(s, func(a, b events.ServerConfig) int { return cmp.Compare(a.Name, b.Name) })
}

func removeServer(s []events.ServerConfig, name string) []events.ServerConfig {
	return slices.DeleteFunc(s, func(c events.ServerConfig) bool { return c.Name == name })
}

var errNoSession = errors.New("runtime: no live session")
