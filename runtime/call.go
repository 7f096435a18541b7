package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/tracectx"
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
	// Bounded is Result bounded like Rendered, in the shape the server
	// sent it (guard.BoundResult): what a client that takes results whole
	// (the gateway's) gets. It is Result itself when nothing was cut.
	Bounded *mcp.CallToolResult
	// Rendered is Result as text for an agent's context: bounded by the
	// server's "maxResultChars", else Options.MaxResultChars, and wrapped
	// when asked.
	guard.Rendered
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
//     JSON), bounded by the server's "maxResultChars", else
//     Options.MaxResultChars, with a marker (and bounded in its own shape
//     as CallResult.Bounded), scanned for
//     injection signals (advisory: nothing is blocked or changed), wrapped
//     when asked, and journaled on call.finished, redacted and capped.
//
// A call made in a caller's trace (a valid span in ctx, as
// go.opentelemetry.io/otel/trace's SpanContextFromContext finds it; see
// [WithTraceContext]) records the caller's span on call.started and sends
// the server, in the request's params._meta, traceparent and tracestate
// in the same trace with the ledger's span of the call as parent.
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
	m.inCalls.Add(1)
	defer m.inCalls.Add(-1)
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
		settings: m.callSettingsFor(entry.Server, c), red: c.redactor(),
		durable: m.opts.Durability == Audit, caller: callerSpan(ctx)}

	if err := guard.ValidateArgs(name, entry.InputSchema, argsJSON); errors.Is(err, guard.ErrSchemaUnresolved) {
		m.log.Warn("arguments are not checked locally", "err", err)
	} else if err != nil {
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
	settings config.CallSettings
	red      guard.Redactor
	durable  bool
	// caller is the span of the caller the call is made in (trace.go),
	// or not valid.
	caller trace.SpanContext
}

func (cl *call) started(dec decision, attempt int, retryOf string, cap int) *events.CallStarted {
	p := &events.CallStarted{CallID: cl.id, Tool: cl.entry.Tool, Name: cl.name,
		Args: blobOf(cl.red.Redact(cl.args), cap), Caller: cl.opts.Caller, Policy: string(dec.policy),
		ApprovedBy: dec.by, DefHash: cl.entry.DefHash, Attempt: attempt, RetryOf: retryOf}
	p.TraceParent, p.TraceState = tracectx.Format(cl.caller)
	return p
}

// refuse journals a call that failed local validation: it was never sent.
func (m *Manager) refuse(cl *call, err error) {
	if _, jerr := m.submit(m.ctx, cl.entry.Server, cl.started(decision{}, 0, "", m.opts.JournalCap), cl.durable); jerr != nil {
		return
	}
	_, _ = m.submit(m.ctx, cl.entry.Server, &events.CallFinished{CallID: cl.id, Outcome: events.OutcomeInvalidArgs,
		Error: string(cl.red.Redact([]byte(err.Error())))}, cl.durable)
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
		res, raw, transit, err := m.callUpstream(ctx, cctx, cl, c, cs)
		stop()
		cancel()
		fin := &events.CallFinished{CallID: cl.id, DurationNs: time.Since(t0).Nanoseconds()}
		got := res
		res, err, lost := m.outcome(ctx, cl, c, res, err, timeout, fin)
		if res != got {
			raw, transit = nil, nil // outcome made a result of its own: journal that one
		}
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
		return m.finish(cl, res, raw, transit, err, fin)
	}
}

// callUpstream sends the call on session cs of c, within cctx (ctx is
// the caller's): itself where it may (wire_call.go), else through
// go-sdk's client. It returns the result, as decoded and as the server
// sent it (raw: nil if the transport does not keep it), and what was cut
// of it in transit.
func (m *Manager) callUpstream(ctx, cctx context.Context, cl *call, c *conn, cs *mcp.ClientSession) (*mcp.CallToolResult, []byte, *guard.Transit, error) {
	meta := traceMeta(cl.caller, m.sid, cl.id)
	if p := m.plainWire(ctx, c, cs); p.w != nil {
		if p.base != nil {
			meta = m.callMeta(ctx, p.base, meta)
		}
		res, raw, transit, err := p.w.callTool(cctx, cl.entry.Tool, cl.args, meta)
		if err != nil || !p.answersInput || !res.NeedsInput() {
			return res, raw, transit, err
		}
		// The server asks for input, which go-sdk's client answers itself
		// (multi-round trip): the call is made again through it, the
		// server's first answer dropped. A 2026-07-28 server keeps no
		// state between the rounds of a call but requestState.
		meta = traceMeta(cl.caller, m.sid, cl.id)
	}
	cctx, sink := withWireSink(cctx)
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: cl.entry.Tool, Arguments: json.RawMessage(cl.args), Meta: meta})
	raw, decoded, transit := sink.take()
	if decoded != nil {
		// The result arrived, decoded on the wire; go-sdk was handed
		// errDecodedHere in its place (wire_decode.go).
		res, err = decoded, nil
	}
	return res, raw, transit, err
}

// plain is how a call may be sent around go-sdk's client (plainWire): on
// w (nil: it may not), on a 2026-07-28 session with base, the _meta
// go-sdk's client would add (call_meta.go), and answersInput whether
// that client answers a server's input requests itself.
type plain struct {
	w            *wireConn
	base         mcp.Meta
	answersInput bool
}

// plainWire returns how to send a call made with ctx on session cs of c
// around go-sdk's client (wire_call.go): on a stdio or in-process
// connection, with no sending middleware of a front end's that has a
// part in it (Options.PlainCall), and on a 2026-07-28 session once the
// _meta go-sdk would add is known.
func (m *Manager) plainWire(ctx context.Context, c *conn, cs *mcp.ClientSession) plain {
	if m.sdkCalls || m.opts.NewClient != nil && (m.opts.PlainCall == nil || !m.opts.PlainCall(ctx)) {
		return plain{}
	}
	ir := cs.InitializeResult()
	if ir == nil {
		return plain{}
	}
	c.mu.Lock()
	p := plain{w: c.wire, base: c.callMeta, answersInput: c.answersInput}
	c.mu.Unlock()
	if ir.ProtocolVersion >= stateless && p.base == nil {
		return plain{} // go-sdk's _meta is not known
	}
	return p
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
