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
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
)

// DefaultJournalCap is how much of a call's arguments or result is
// journaled by default (Options.JournalCap); the rest is recorded by size
// and SHA-256.
const DefaultJournalCap = 64 << 10

// CallOptions qualify one call. The zero value is a call by an agent
// under the configured policies.
type CallOptions struct {
	// Caller names who calls ("cli", an agent's name); it is recorded on
	// call.started.
	Caller string
	// UserApproved, when set, says the caller is the user and that making
	// this call is their own approval, and how ("mcpledger call"). Under
	// policy ask it is journaled as call.decided by "user:"+UserApproved
	// instead of consulting the Approver. Policy never still denies.
	UserApproved string
	// Wrap wraps CallResult.Text in boundary markers (see WrapOutput);
	// Options.WrapOutput does it for every call.
	Wrap bool
}

// CallResult is a completed call.
type CallResult struct {
	// CallID identifies the call's journal records (of the try that
	// answered, when a call was retried).
	CallID string
	// Result is the CallToolResult as the server sent it.
	Result *mcp.CallToolResult
	// Rendered is Result as text for an agent's context: bounded by
	// Options.MaxResultChars, and wrapped when asked.
	Rendered
	// Signals names the injection patterns found in the rendered text
	// (advisory; also journaled on call.finished).
	Signals []string
}

// CallTool calls the catalog tool name with args (anything that encodes
// as a JSON object; nil means {}) and returns the result as the server
// sent it. It is CallToolWith without options; see there for the path a
// call takes. A tool error comes back as a result with IsError set; err
// is reserved for the call not completing.
func (m *Manager) CallTool(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	r, err := m.CallToolWith(ctx, name, args, nil)
	if r == nil {
		return nil, err
	}
	return r.Result, err
}

// CallToolWith calls the catalog tool name with args. A tool whose server
// is still connecting (a deferred tool) waits, up to the startup timeout,
// for it. Then, in order, each step journaled:
//
//  1. The arguments are checked against the tool's input schema: an
//     *ArgumentsError (ErrInvalidArguments) names the field and why; the
//     request is never sent (call.started, then call.finished with
//     outcome invalid_arguments).
//  2. The call policy (the tool's, else the server's, else
//     Options.CallPolicy; default always) is applied: never denies; ask
//     consults Options.Approver, or takes o.UserApproved as the user's
//     own approval. The decision is journaled durably as call.decided
//     before anything is sent; a denial returns a *DeniedError
//     (ErrCallDenied) and the server never sees the call.
//  3. call.started (redacted arguments, policy, who allowed it, the
//     definition hash, the connection attempt) is journaled (durably in
//     Audit mode) and the request is sent with the tool's timeout
//     ("toolTimeouts", else the server's "timeout", else
//     Options.CallTimeout, default 60 s).
//  4. If the connection is lost, the call gets one reconnect and one
//     retry (a new call.started with RetryOf) only when the request was
//     provably never delivered (the session had already closed) or the
//     tool is annotated read-only or idempotent; otherwise the error is
//     ErrOutcomeUnknown. The caller cancelling ctx is not a failure of the
//     tool: it is journaled as cancelled, go-sdk sends the server
//     notifications/cancelled, and nothing is retried.
//  5. An unknown tool, whether a JSON-RPC error (go-sdk servers) or an
//     isError result (TypeScript servers), returns ErrUnknownTool and
//     re-lists the server's tools.
//  6. The result is rendered (text blocks verbatim, other blocks as
//     JSON), bounded by Options.MaxResultChars with a marker, scanned for
//     injection signals (advisory: nothing is blocked or changed), wrapped
//     when asked, and journaled on call.finished, redacted and capped.
func (m *Manager) CallToolWith(ctx context.Context, name string, args any, o *CallOptions) (*CallResult, error) {
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
	if o == nil {
		o = &CallOptions{}
	}

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
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("runtime: arguments for %s do not encode as JSON: %w", name, err)
	}
	if string(argsJSON) == "null" { // nil, or a typed nil map: no arguments
		argsJSON = []byte("{}")
	}
	cl := &call{entry: entry, name: name, args: argsJSON, opts: o, id: uuid.Must(uuid.NewV7()).String(),
		settings: m.callSettingsFor(entry.Server, c), red: newRedactor(c.spec.secrets()),
		durable: m.opts.Durability == Audit}

	if err := validateArgs(m.log, name, entry.InputSchema, argsJSON); err != nil {
		m.refuse(cl, err)
		return nil, err
	}
	dec, err := m.approve(ctx, cl)
	if err != nil {
		return nil, err
	}
	return m.send(ctx, cl, c, dec)
}

// call is one call on its way through CallToolWith.
type call struct {
	entry    projections.Entry
	name     string
	args     []byte
	opts     *CallOptions
	id       string
	settings CallSettings
	red      redactor
	durable  bool
}

func (cl *call) started(dec decision, attempt int, retryOf string, cap int) *events.CallStarted {
	return &events.CallStarted{CallID: cl.id, Tool: cl.entry.Tool, Name: cl.name,
		Args: blobOf(cl.red.redact(cl.args), cap), Caller: cl.opts.Caller, Policy: string(dec.policy),
		ApprovedBy: dec.by, DefHash: cl.entry.DefHash, Attempt: attempt, RetryOf: retryOf}
}

// refuse journals a call that failed local validation: it was never sent.
func (m *Manager) refuse(cl *call, err error) {
	if _, jerr := m.submit(m.ctx, cl.entry.Server, cl.started(decision{}, 0, "", m.opts.JournalCap), cl.durable); jerr != nil {
		return
	}
	_, _ = m.submit(m.ctx, cl.entry.Server, &events.CallFinished{CallID: cl.id, Outcome: events.OutcomeInvalidArgs,
		Error: string(cl.red.redact([]byte(err.Error())))}, cl.durable)
}

// send sends the call, retrying once after a reconnect when that is safe,
// and finishes it.
func (m *Manager) send(ctx context.Context, cl *call, c *conn, dec decision) (*CallResult, error) {
	server := cl.entry.Server
	timeout := m.timeoutFor(&c.spec, cl.entry.Tool)
	retryOf := ""
	reconnected := false
	for {
		cs := c.session()
		if cs == nil {
			// The session ended before anything was sent.
			if reconnected {
				return nil, &UnavailableError{Server: server, State: events.StateReconnecting, Detail: "its session just ended"}
			}
			reconnected = true
			nc, err := m.reconnectFor(ctx, server, c)
			if err != nil {
				return nil, err
			}
			c = nc
			continue
		}
		if _, err := m.submit(ctx, server, cl.started(dec, c.attempt, retryOf, m.opts.JournalCap), cl.durable); err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		stop := context.AfterFunc(m.callCtx, cancel) // Close fails calls in flight
		t0 := time.Now()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: cl.entry.Tool, Arguments: json.RawMessage(cl.args)})
		stop()
		cancel()
		fin := &events.CallFinished{CallID: cl.id, DurationNs: time.Since(t0).Nanoseconds()}
		res, err, lost := m.outcome(ctx, cl, c, res, err, timeout, fin)
		if lost.retriable && !reconnected && ctx.Err() == nil && m.callCtx.Err() == nil &&
			(lost.undelivered || safeToRepeat(cl.entry.Annotations)) {
			fin.Retrying = true
			fin.Error += "; reconnecting to retry once (" + lost.why(cl.entry.Annotations) + ")"
			if _, jerr := m.submit(m.ctx, server, fin, cl.durable); jerr != nil {
				return nil, jerr
			}
			reconnected = true
			nc, rerr := m.reconnectFor(ctx, server, c)
			if rerr != nil {
				return nil, fmt.Errorf("%w (reconnecting to retry: %w)", err, rerr)
			}
			c, retryOf, cl.id = nc, cl.id, uuid.Must(uuid.NewV7()).String()
			continue
		}
		return m.finish(cl, res, err, fin)
	}
}

// lostInfo says whether a failure was a lost connection and whether the
// request provably never left.
type lostInfo struct{ retriable, undelivered bool }

func (l lostInfo) why(a events.ToolAnnotations) string {
	switch {
	case l.undelivered:
		return "the request was never sent"
	case a.ReadOnly != nil && *a.ReadOnly:
		return "the tool is annotated read-only"
	}
	return "the tool is annotated idempotent"
}

// safeToRepeat reports whether a tool may run twice: annotated read-only
// or idempotent.
func safeToRepeat(a events.ToolAnnotations) bool {
	return a.ReadOnly != nil && *a.ReadOnly || a.Idempotent != nil && *a.Idempotent
}

// outcome classifies a call's result or error onto fin and returns what
// the caller gets.
func (m *Manager) outcome(ctx context.Context, cl *call, c *conn, res *mcp.CallToolResult, err error,
	timeout time.Duration, fin *events.CallFinished) (*mcp.CallToolResult, error, lostInfo) {
	name, server, tool := cl.name, cl.entry.Server, cl.entry.Tool
	switch {
	case err == nil && unknownToolResult(res, tool):
		fin.Outcome, fin.Error = events.OutcomeUnknownTool, firstText(res)
		c.requestRelist("refresh")
		return res, fmt.Errorf("%w: server %q says it has no tool %q (its tools are being re-listed): %s", ErrUnknownTool, server, tool, firstText(res)), lostInfo{}
	case err == nil && res.IsError:
		fin.Outcome = events.OutcomeToolError
		return res, nil, lostInfo{}
	case err == nil:
		fin.Outcome = events.OutcomeOK
		return res, nil, lostInfo{}
	case m.callCtx.Err() != nil:
		fin.Outcome, fin.Error = events.OutcomeError, "shutting down"
		return res, ErrShuttingDown, lostInfo{}
	case ctx.Err() != nil:
		fin.Outcome, fin.Error = events.OutcomeCancelled, "cancelled by the caller: "+ctx.Err().Error()
		return res, fmt.Errorf("runtime: %s: cancelled by the caller: %w", name, ctx.Err()), lostInfo{}
	case errors.Is(err, context.DeadlineExceeded):
		fin.Outcome, fin.Error = events.OutcomeTimeout, fmt.Sprintf("no result within %s", timeout)
		return res, fmt.Errorf("runtime: %s timed out after %s: %w", name, timeout, err), lostInfo{}
	case tooLarge(err):
		je, _ := protocolError(err)
		fin.Outcome, fin.Error = events.OutcomeError, je.Message
		return nil, fmt.Errorf("%w: %s: %s", ErrResultTooLarge, name, je.Message), lostInfo{}
	case unknownToolError(err):
		fin.Outcome, fin.Error = events.OutcomeUnknownTool, err.Error()
		c.requestRelist("refresh")
		return nil, fmt.Errorf("%w: server %q says it has no tool %q (its tools are being re-listed): %w", ErrUnknownTool, server, tool, err), lostInfo{}
	case errors.Is(err, mcp.ErrConnectionClosed):
		// go-sdk refuses to write a call once the connection is closing:
		// the request never left.
		fin.Outcome, fin.Error = events.OutcomeError, "the connection had closed; the request was not sent: "+err.Error()
		return nil, fmt.Errorf("runtime: %s: the connection to %q had closed; the request was not sent: %w", name, server, err),
			lostInfo{retriable: true, undelivered: true}
	case connectionLost(err):
		fin.Outcome, fin.Error = events.OutcomeLost, "connection lost with the request in flight; the outcome is unknown: "+err.Error()
		return nil, fmt.Errorf("%w: %s: the connection to %q was lost with the request in flight; the server may or may not have acted on it: %w",
			ErrOutcomeUnknown, name, server, err), lostInfo{retriable: true}
	}
	fin.Outcome, fin.Error = events.OutcomeError, err.Error()
	return res, fmt.Errorf("runtime: %s: %w", name, err), lostInfo{}
}

// unknownToolError reports whether err is a live server's JSON-RPC
// "unknown tool" (go-sdk: -32602, `unknown tool "x"`).
func unknownToolError(err error) bool {
	je, ok := protocolError(err)
	return ok && je.Code == -32602 && strings.Contains(strings.ToLower(je.Message), "unknown tool")
}

// unknownToolResult reports whether res is the TypeScript SDK's isError
// result for an unknown tool ("MCP error -32602: Tool x not found").
func unknownToolResult(res *mcp.CallToolResult, tool string) bool {
	if res == nil || !res.IsError || len(res.Content) != 1 {
		return false
	}
	t := strings.ToLower(firstText(res))
	if len(t) > 512 {
		return false
	}
	return strings.Contains(t, "tool "+strings.ToLower(tool)+" not found") ||
		strings.Contains(t, "unknown tool") && strings.Contains(t, "-32602")
}

func firstText(res *mcp.CallToolResult) string {
	if res != nil && len(res.Content) > 0 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}

// finish renders the result, scans it, journals call.finished and
// answers the caller.
func (m *Manager) finish(cl *call, res *mcp.CallToolResult, err error, fin *events.CallFinished) (*CallResult, error) {
	out := &CallResult{CallID: cl.id, Result: res}
	if res != nil {
		out.Rendered = RenderResult(res, m.opts.MaxResultChars)
		out.Signals = DetectInjection(out.Text)
		fin.Signals, fin.RenderedChars, fin.CutChars = out.Signals, int64(out.Chars), int64(out.Cut)
		if cl.opts.Wrap || m.opts.WrapOutput {
			out.Text = WrapOutput(cl.entry.Server, cl.entry.Tool, out.Text)
		}
		fin.Result = blobOf(cl.red.redact(resultJSON(res)), m.opts.JournalCap)
		if len(out.Signals) > 0 {
			m.log.Warn("possible prompt injection in tool output (advisory)", "server", cl.entry.Server,
				"tool", cl.entry.Tool, "signals", out.Signals)
		}
	}
	fin.Error = string(cl.red.redact([]byte(fin.Error)))
	// The result is journaled even if the caller has gone: use a context
	// that outlives ctx (but not the manager).
	if _, jerr := m.submit(m.ctx, cl.entry.Server, fin, cl.durable); jerr != nil && err == nil {
		return out, jerr
	}
	if res == nil && err != nil {
		return nil, err
	}
	return out, err
}

// reconnectFor reconnects server for a call's one retry (the storm
// breaker still applies) and waits, up to the startup timeout, for a
// session other than the one of old.
func (m *Manager) reconnectFor(ctx context.Context, server string, old *conn) (*conn, error) {
	views, cancel := m.Subscribe()
	defer cancel()
	// Ask for a reconnect unless the supervisor already made or is making
	// one (it may have seen the session end first).
	v := m.view.Load()
	st, _ := v.Server(server)
	if c := v.live[server]; (c == nil || c == old) && st.State != events.StateLaunching && st.State != events.StateHandshaking {
		if err := m.command(ctx, server, &events.ReconnectRequested{By: "call.retry"}); err != nil {
			return nil, fmt.Errorf("runtime: reconnect %q: %w", server, err)
		}
	}
	deadline := time.NewTimer(m.opts.StartupTimeout)
	defer deadline.Stop()
	for {
		v := m.view.Load()
		if c := v.live[server]; c != nil && c != old && c.session() != nil {
			return c, nil
		}
		st, _ := v.Server(server)
		if st.State == events.StateFailed || st.State == events.StateStopped {
			return nil, &UnavailableError{Server: server, State: st.State, Reason: st.Reason, Detail: st.Error}
		}
		select {
		case <-views:
		case <-deadline.C:
			return nil, &UnavailableError{Server: server, State: st.State, Reason: st.Reason,
				Detail: fmt.Sprintf("not ready again within %s of the reconnect", m.opts.StartupTimeout)}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.callCtx.Done():
			return nil, ErrShuttingDown
		}
	}
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

// resultJSON encodes res for the journal: the shape of its MarshalJSON,
// but text blocks are written directly, because go-sdk's MarshalJSON
// re-compacts every block (about 200 µs for 10 KB of text).
func resultJSON(res *mcp.CallToolResult) []byte {
	b := make([]byte, 0, 64+len(firstText(res))*11/10)
	b = append(b, `{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		if t, ok := c.(*mcp.TextContent); ok && t.Meta == nil && t.Annotations == nil {
			b = append(b, `{"type":"text","text":`...)
			b = appendJSONString(b, t.Text)
			b = append(b, '}')
			continue
		}
		cb, err := json.Marshal(c)
		if err != nil {
			cb, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		b = append(b, cb...)
	}
	b = append(b, ']')
	if res.StructuredContent != nil {
		if sb, err := json.Marshal(res.StructuredContent); err == nil {
			b = append(b, `,"structuredContent":`...)
			b = append(b, sb...)
		}
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if res.Meta != nil {
		if mb, err := json.Marshal(res.Meta); err == nil {
			b = append(b, `,"_meta":`...)
			b = append(b, mb...)
		}
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
