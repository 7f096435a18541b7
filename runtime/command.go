package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

// ---- commands on servers (stop, reconnect, reload, refresh) and shutting the manager down ----

// Stop stops one server; it stays stopped until Reconnect.
func (m *Manager) Stop(ctx context.Context, name string) error {
	return m.command(ctx, name, &events.StopRequested{Reason: events.ReasonStopRequested, By: "api"})
}

// Reconnect reconnects one server now: a failed or stopped one is
// relaunched, a reconnecting one skips its backoff wait, a running one is
// restarted. It clears a storm hold: the breaker no longer counts the
// server's crashes before it.
func (m *Manager) Reconnect(ctx context.Context, name string) error {
	return m.command(ctx, name, &events.ReconnectRequested{By: "api"})
}

// RecordReconnect journals an explicit reconnect of server made while no
// mcpledger holds the journal (`mcpledger reconnect NAME` offline): a
// short session of its own holding the reconnect.requested, which clears
// a storm hold: the next session's storm breaker no longer counts the
// server's crashes before it. The caller checks that server is in the
// config.
func RecordReconnect(ctx context.Context, j Journal, server, by, build string, now func() int64) (uuid.UUID, error) {
	return recordOffline(ctx, j, build, "reconnect", now, events.Event{Kind: events.KindReconnectRequested, Server: server,
		Payload: &events.ReconnectRequested{By: by}})
}

// RecordAuth journals p, an auth.* event about server (a sign-in, a
// sign-out or a failed sign-in that `mcpledger login`/`logout` did beside
// the running session): a server waiting for a sign-in (needs_auth)
// relaunches on auth.signed_in.
func (m *Manager) RecordAuth(ctx context.Context, server string, p events.Payload) error {
	if !isAuthKind(p.Kind()) {
		return fmt.Errorf("runtime: RecordAuth of %s: only auth.* events", p.Kind())
	}
	return m.command(ctx, server, p)
}

// RecordAuth journals p, an auth.* event about server, in a session of
// its own, for when no mcpledger holds the journal: `mcpledger login`
// records its sign-in so that replay shows when it happened.
func RecordAuth(ctx context.Context, j Journal, server, build string, p events.Payload, now func() int64) (uuid.UUID, error) {
	if !isAuthKind(p.Kind()) {
		return uuid.Nil, fmt.Errorf("runtime: RecordAuth of %s: only auth.* events", p.Kind())
	}
	cmd := "login"
	if p.Kind() == events.KindAuthSignedOut {
		cmd = "logout"
	}
	return recordOffline(ctx, j, build, cmd, now, events.Event{Kind: p.Kind(), Server: server, Payload: p})
}

func isAuthKind(k events.Kind) bool {
	switch k {
	case events.KindAuthSignedIn, events.KindAuthRefreshed, events.KindAuthFailed, events.KindAuthSignedOut:
		return true
	}
	return false
}

// ReconnectFailed reconnects every failed server.
func (m *Manager) ReconnectFailed(ctx context.Context) error {
	return m.command(ctx, "", &events.ReconnectRequested{FailedOnly: true, By: "api"})
}

// Reload re-reads the configuration and reconciles: added servers start,
// removed ones stop, changed ones restart, unchanged ones are untouched.
// A reading with a file that cannot be read whole changes no server: it
// journals the errors only (see config.Reading.Err).
func (m *Manager) Reload(ctx context.Context) error {
	_, err := m.observeConfig(ctx, "manual")
	return err
}

// Refresh re-lists a ready server's tools now.
func (m *Manager) Refresh(ctx context.Context, name string) error {
	var found, ready bool
	var degraded error
	if !m.onLoop(ctx, func() {
		// A failing journal could not record the new list: refuse, like
		// every other command.
		if degraded = m.errDegraded(); degraded != nil {
			return
		}
		_, found = m.state.Server(name)
		if c := m.conns[name]; c != nil && m.view.Load().live[name] == c {
			ready = true
			c.requestRelist("refresh")
		}
	}) {
		return ErrShuttingDown
	}
	switch {
	case degraded != nil:
		return degraded
	case !found:
		return fmt.Errorf("%w: %q", ErrUnknownServer, name)
	case !ready:
		st, _ := m.view.Load().Server(name)
		return &UnavailableError{Server: name, State: st.State, Reason: st.Reason, Detail: "only a ready server can be re-listed"}
	}
	return nil
}

func (m *Manager) command(ctx context.Context, server string, p events.Payload) error {
	_, err := m.submit(ctx, server, p, true)
	if errors.Is(err, fsm.ErrUnknownServer) {
		return fmt.Errorf("%w: %q", ErrUnknownServer, server)
	}
	return err
}

// Close stops the session: it fails every call still pending with
// ErrShuttingDown, journals the stop, stops every server (no process
// outlives Close), and waits for every goroutine the manager started.
func (m *Manager) Close() error { return m.Shutdown("shutdown") }

// Shutdown is Close with a note on who or what asked for it (a signal,
// "--once"), recorded on the stop.requested event.
func (m *Manager) Shutdown(by string) error {
	m.closeOnce.Do(func() {
		m.callMu.Lock()
		m.closing = true
		m.callMu.Unlock()
		m.callCancel()
		waitBounded(m.calls.Wait, 5*time.Second)
		if m.started.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m.onLoop(ctx, m.lastRetry)
			if _, err := m.submit(ctx, "", &events.StopRequested{Reason: events.ReasonShutdown, By: by}, true); err != nil && !errors.Is(err, ErrShuttingDown) {
				m.closeErr = err
			}
			// Let the stopped servers' last observations (their exits) be
			// journaled: wait for the teardowns, then for the loop to
			// drain what they posted.
			waitBounded(m.teardown.Wait, 5*time.Second)
			m.onLoop(ctx, func() {})
			if m.lastLaterWait(ctx) != nil && m.closeErr == nil {
				m.closeErr = fmt.Errorf("%w: the last relaxed records did not reach the disk", ErrJournal)
			}
			cancel()
		}
		m.cancel()
		<-m.loopDoneOrClosed()
		m.procMu.Lock()
		if o := m.deg; o != nil && (len(o.backlog) > 0 || o.dropped > 0) {
			m.log.Error("the journal failed until the end: observations were never journaled",
				"backlog", len(o.backlog), "dropped", o.dropped, "since", o.since, "err", o.err)
		}
		m.procMu.Unlock()
		// The loop has ended: its connections are ours now. Anything the
		// stop decision did not reach is killed.
		for name, c := range m.conns {
			delete(m.conns, name)
			c.shutdown(false)
		}
		m.wg.Wait()
		m.reaper.close() // every group has been ended: it exits with nothing to kill
		if m.started.Load() && m.closeErr == nil && m.journalErr.Load() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			m.saveCheckpoint(ctx)
			cancel()
		}
	})
	return m.closeErr
}

func (m *Manager) loopDoneOrClosed() <-chan struct{} {
	if !m.started.Load() {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return m.loopDone
}

func (m *Manager) lastLaterWait(ctx context.Context) error {
	var w func(context.Context) error
	m.onLoop(ctx, func() { m.flushHeld(); w = m.lastLater })
	if w == nil {
		return nil
	}
	return w(ctx)
}

func waitBounded(wait func(), d time.Duration) {
	done := make(chan struct{})
	go func() { // ends when wait returns; bounded by the calls' own deadlines
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// RecordRejected journals, durably, a request that a front end refused
// before it reached the Manager: the gateway's HTTP requests with a bad
// Host, Origin or token. The ledger then shows who knocked.
func (m *Manager) RecordRejected(ctx context.Context, r *events.GatewayRejected) error {
	_, err := m.submit(ctx, "", r, true)
	return err
}
