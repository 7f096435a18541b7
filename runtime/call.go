package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
)

// DefaultJournalCap is how much of a call's arguments or result is
// journaled; the rest is recorded by size and SHA-256.
const DefaultJournalCap = 64 << 10

// CallTool calls the catalog tool name with args (anything that encodes
// as a JSON object; nil means {}). The call's start is journaled before the
// request is sent and its result after (durably, in Audit mode). A tool
// whose server is still connecting (a deferred tool) waits, up to the
// startup timeout, for it. A tool error comes back as a result with
// IsError set; err is reserved for the call not completing.
func (m *Manager) CallTool(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	if !m.started.Load() {
		return nil, ErrNotStarted
	}
	m.callMu.Lock()
	if m.closing {
		m.callMu.Unlock()
		return nil, ErrShuttingDown
	}
	m.calls.Add(1)
	m.callMu.Unlock()
	defer m.calls.Done()

	v := m.view.Load()
	entry, ok := v.Tool(name)
	if !ok {
		return nil, m.unknownTool(v, name)
	}
	c := v.live[entry.Server]
	if c == nil {
		var err error
		if c, err = m.waitLive(ctx, entry.Server); err != nil {
			return nil, err
		}
	}
	cs := c.session()
	if cs == nil {
		return nil, &UnavailableError{Server: entry.Server, State: events.StateReconnecting, Detail: "its session just ended"}
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("runtime: arguments for %s do not encode as JSON: %w", name, err)
	}
	if string(argsJSON) == "null" { // nil, or a typed nil map: no arguments
		argsJSON = []byte("{}")
	}
	durable := m.opts.Durability == Audit
	callID := uuid.Must(uuid.NewV7()).String()
	red := newRedactor(c.spec.secrets())
	if _, err := m.submit(ctx, entry.Server, &events.CallStarted{CallID: callID, Tool: entry.Tool, Name: name,
		Args: blobOf(red.redact(argsJSON), DefaultJournalCap)}, durable); err != nil {
		return nil, err
	}

	timeout := m.opts.CallTimeout
	if c.spec.Timeout > 0 {
		timeout = c.spec.Timeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	stop := context.AfterFunc(m.callCtx, cancel) // Close fails calls in flight
	t0 := time.Now()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: entry.Tool, Arguments: json.RawMessage(argsJSON)})
	stop()
	cancel()
	fin := &events.CallFinished{CallID: callID, DurationNs: time.Since(t0).Nanoseconds()}
	switch {
	case err == nil && res.IsError:
		fin.Outcome = events.OutcomeToolError
	case err == nil:
		fin.Outcome = events.OutcomeOK
	case m.callCtx.Err() != nil:
		fin.Outcome, fin.Error = events.OutcomeError, "shutting down"
		err = ErrShuttingDown
	case ctx.Err() != nil:
		fin.Outcome, fin.Error = events.OutcomeCancelled, ctx.Err().Error()
	case errors.Is(err, context.DeadlineExceeded):
		fin.Outcome, fin.Error = events.OutcomeTimeout, fmt.Sprintf("no result within %s", timeout)
		err = fmt.Errorf("runtime: %s timed out after %s: %w", name, timeout, err)
	case connectionLost(err):
		fin.Outcome, fin.Error = events.OutcomeError, "connection lost; the outcome is unknown: "+err.Error()
		err = fmt.Errorf("runtime: %s: connection to %q lost while the call was in flight; the outcome is unknown: %w", name, entry.Server, err)
	default:
		fin.Outcome, fin.Error = events.OutcomeError, err.Error()
	}
	if res != nil {
		if b, merr := json.Marshal(res); merr == nil {
			fin.Result = blobOf(red.redact(b), DefaultJournalCap)
		}
	}
	// The result is journaled even if the caller has gone: use a context
	// that outlives ctx (but not the manager).
	if _, jerr := m.submit(m.ctx, entry.Server, fin, durable); jerr != nil && err == nil {
		return res, jerr
	}
	return res, err
}

// unknownTool explains a name the catalog does not hold: if it names a
// server that is unavailable, say why and how to recover.
func (m *Manager) unknownTool(v *View, name string) error {
	for _, w := range v.Catalog.Withheld {
		if projections.ToolName(w.Server, w.Tool) == name {
			return &UnavailableError{Server: w.Server, State: events.StateReady, Reason: w.Reason,
				Detail: fmt.Sprintf("tool %q changed its definition since the server was approved", w.Tool)}
		}
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		for _, s := range v.Status {
			if strings.HasPrefix(rest, sanitizeName(s.Name)+"__") && s.State != events.StateReady {
				return &UnavailableError{Server: s.Name, State: s.State, Reason: s.Reason, Detail: s.Error}
			}
		}
	}
	return fmt.Errorf("%w: %q (mcpledger tools lists what is available)", ErrUnknownTool, name)
}

func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// waitLive waits, up to the startup timeout, for server to be ready.
func (m *Manager) waitLive(ctx context.Context, server string) (*conn, error) {
	views, cancel := m.Subscribe()
	defer cancel()
	deadline := time.NewTimer(m.opts.StartupTimeout)
	defer deadline.Stop()
	for {
		v := m.view.Load()
		if c := v.live[server]; c != nil {
			return c, nil
		}
		st, ok := v.Server(server)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownServer, server)
		}
		if st.State == events.StateFailed || st.State == events.StateStopped {
			return nil, &UnavailableError{Server: server, State: st.State, Reason: st.Reason, Detail: st.Error}
		}
		select {
		case <-views:
		case <-deadline.C:
			return nil, &UnavailableError{Server: server, State: st.State, Reason: st.Reason,
				Detail: fmt.Sprintf("not ready after %s", m.opts.StartupTimeout)}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.callCtx.Done():
			return nil, ErrShuttingDown
		}
	}
}

// Stop stops one server; it stays stopped until Reconnect.
func (m *Manager) Stop(ctx context.Context, name string) error {
	return m.command(ctx, name, &events.StopRequested{Reason: events.ReasonStopRequested, By: "api"})
}

// Reconnect reconnects one server now: a failed or stopped one is
// relaunched, a reconnecting one skips its backoff wait, a running one is
// restarted. The storm breaker still applies.
func (m *Manager) Reconnect(ctx context.Context, name string) error {
	return m.command(ctx, name, &events.ReconnectRequested{By: "api"})
}

// ReconnectFailed reconnects every failed server.
func (m *Manager) ReconnectFailed(ctx context.Context) error {
	return m.command(ctx, "", &events.ReconnectRequested{FailedOnly: true, By: "api"})
}

// Reload re-reads the configuration and reconciles: added servers start,
// removed ones stop, changed ones restart, unchanged ones are untouched.
func (m *Manager) Reload(ctx context.Context) error {
	_, err := m.observeConfig(ctx, "manual")
	return err
}

// Refresh re-lists a ready server's tools now.
func (m *Manager) Refresh(ctx context.Context, name string) error {
	var found, ready bool
	if !m.onLoop(ctx, func() {
		_, found = m.state.Server(name)
		if c := m.conns[name]; c != nil && m.view.Load().live[name] == c {
			ready = true
			c.requestRelist("refresh")
		}
	}) {
		return ErrShuttingDown
	}
	switch {
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
		// The loop has ended: its connections are ours now. Anything the
		// stop decision did not reach is killed.
		for name, c := range m.conns {
			delete(m.conns, name)
			c.shutdown(false)
		}
		m.wg.Wait()
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
	m.onLoop(ctx, func() { w = m.lastLater })
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

// blobOf caps a JSON text for the journal, keeping its size and hash.
func blobOf(b []byte, limit int) events.Blob {
	sum := sha256.Sum256(b)
	bl := events.Blob{Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	if len(b) > limit {
		bl.Text, bl.Truncated = string(b[:limit]), true
	} else {
		bl.Text = string(b)
	}
	return bl
}
