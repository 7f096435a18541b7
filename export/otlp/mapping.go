package otlp

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/tracectx"
)

// Span is one span the journal implies, as plain data: the mapping's
// output, turned into the SDK's spans only when it is exported.
type Span struct {
	TraceID trace.TraceID
	SpanID  trace.SpanID
	// Parent is the caller's span this one is a child of (a call made in
	// the caller's trace: the traceparent on its call.started, or on the
	// call.decided of one denied); not valid
	// for a root span.
	Parent trace.SpanContext
	Name   string
	Kind   trace.SpanKind
	// Start and End are unix nanoseconds, from the journal's events.
	Start, End int64
	Attrs      []attribute.KeyValue
	Events     []SpanEvent
	// Links are the spans this one follows from (a retry links its
	// first try).
	Links  []trace.SpanContext
	Status codes.Code
	// StatusMsg describes an Error status.
	StatusMsg string
}

// SpanEvent is one timed event on a span.
type SpanEvent struct {
	Name  string
	Time  int64
	Attrs []attribute.KeyValue
}

// Log is one journal event as a log record: the audit trail.
type Log struct {
	// Time is the event's time, in unix nanoseconds.
	Time int64
	// EventName is the event's kind.
	EventName string
	Severity  log.Severity
	// Body is the event's payload as JSON, as the journal holds it
	// (redacted where it carries arguments, results or config).
	Body  string
	Attrs []attribute.KeyValue
	// TraceID and SpanID are the span the event belongs to, if any.
	TraceID trace.TraceID
	SpanID  trace.SpanID
}

// Attribute keys: the OpenTelemetry MCP and GenAI semantic conventions'
// where they name the thing, mcpledger's own otherwise.
const (
	keyMethod          = "mcp.method.name"
	keyMCPSession      = "mcp.session.id"
	keyProtocol        = "mcp.protocol.version"
	keyToolName        = "gen_ai.tool.name"
	keyOperation       = "gen_ai.operation.name"
	keyToolCallID      = "gen_ai.tool.call.id"
	keyErrorType       = "error.type"
	keySession         = "mcpledger.session.id"
	keyServer          = "mcpledger.server"
	keyCatalogName     = "mcpledger.tool.catalog_name"
	keyOutcome         = "mcpledger.call.outcome"
	keyPolicy          = "mcpledger.call.policy"
	keyApprovedBy      = "mcpledger.call.approved_by"
	keyDecision        = "mcpledger.call.decision"
	keyDecisionReason  = "mcpledger.call.decision_reason"
	keyAttempt         = "mcpledger.call.attempt"
	keyCaller          = "mcpledger.call.caller"
	keyRetryOf         = "mcpledger.call.retry_of"
	keyRetrying        = "mcpledger.call.retrying"
	keySignals         = "mcpledger.call.injection_signals"
	keyArgsBytes       = "mcpledger.call.args_bytes"
	keyResultBytes     = "mcpledger.call.result_bytes"
	keyWireBytes       = "mcpledger.call.wire_bytes"
	keyCutChars        = "mcpledger.call.cut_chars"
	keyServerName      = "mcpledger.server.implementation.name"
	keyServerVersion   = "mcpledger.server.implementation.version"
	keyFrom            = "mcpledger.state.from"
	keyTo              = "mcpledger.state.to"
	keyTrigger         = "mcpledger.state.trigger"
	keyReason          = "mcpledger.state.reason"
	keyConnAttempt     = "mcpledger.connection.attempt"
	keyErrorClass      = "mcpledger.error.class"
	keyEventID         = "mcpledger.event.id"
	keySeq             = "mcpledger.event.seq"
	keyGPos            = "mcpledger.event.gpos"
	keyKind            = "mcpledger.event.kind"
	keyCause           = "mcpledger.event.cause"
	methodToolsCall    = "tools/call"
	operationExecTool  = "execute_tool"
	errorTypeDenied    = "denied"
	spanEventSignals   = "mcpledger.injection_signals"
	spanEventTransit   = "mcpledger.transition"
	connectionSpanName = "connection "
)

// Mapper folds journal events, in global order, into spans and log
// records. It is pure: what it returns depends only on the events given,
// so the same journal maps to the same records, with the same IDs, every
// time. A span is returned when its last event arrives; until then the
// Mapper keeps what it needs, and [Mapper.From] says where to read again
// to rebuild that after a restart.
type Mapper struct {
	calls map[callKey]*openCall
	conns map[connKey]*openConn
	peers map[connKey]peer
	// last is the time of the last event of each session with an open
	// connection span, for ending it when a later session starts.
	last map[uuid.UUID]int64
}

type callKey struct {
	session uuid.UUID
	id      string
}

type connKey struct {
	session uuid.UUID
	server  string
}

// openCall is a call whose span has not ended: decided, or started.
type openCall struct {
	first   uint64 // gpos of its first event
	span    Span
	started bool
}

// openConn is a server connection whose span has not ended.
type openConn struct {
	key   connKey
	first uint64
	span  Span
}

// peer is what a server's handshake said, for the spans that follow it.
type peer struct {
	protocol, mcpSession, name, version string
}

// NewMapper returns a Mapper that has seen no event.
func NewMapper() *Mapper {
	return &Mapper{calls: map[callKey]*openCall{}, conns: map[connKey]*openConn{}, peers: map[connKey]peer{}, last: map[uuid.UUID]int64{}}
}

// From returns the global position of the oldest event an unended span
// began with, or 0 when no span is open: a Mapper fed the log from there
// keeps what this one keeps.
func (m *Mapper) From() uint64 {
	var from uint64
	for _, c := range m.calls {
		if from == 0 || c.first < from {
			from = c.first
		}
	}
	for _, c := range m.conns {
		if from == 0 || c.first < from {
			from = c.first
		}
	}
	return from
}

// Map folds e and returns its log record and the spans it ended.
func (m *Mapper) Map(e events.Event) ([]Span, Log) {
	rec := logOf(e)
	var ended []Span
	switch p := e.Payload.(type) {
	case *events.CallDecided:
		ended = m.callDecided(e, p, &rec)
	case *events.CallStarted:
		m.callStarted(e, p, &rec)
	case *events.CallFinished:
		ended = m.callFinished(e, p, &rec)
	case *events.HandshakeCompleted:
		m.peers[connKey{e.Session, e.Server}] = peer{p.ProtocolVersion, p.SessionID, p.ServerName, p.ServerVersion}
	case *events.ServerTransitioned:
		ended = m.transitioned(e, p, &rec)
	case *events.SessionStopped:
		ended = m.sessionStopped(e.Session, e.Time)
	case *events.SessionStarted:
		ended = m.sessionStarted(e)
	}
	if _, ok := m.last[e.Session]; ok {
		m.last[e.Session] = e.Time
	}
	if c := m.conns[connKey{e.Session, e.Server}]; c != nil && !rec.TraceID.IsValid() {
		// Any other event of a connecting server belongs to its span.
		rec.TraceID, rec.SpanID = c.span.TraceID, c.span.SpanID
	}
	return ended, rec
}

func (m *Mapper) call(e events.Event, id string) *openCall {
	k := callKey{e.Session, id}
	c := m.calls[k]
	if c == nil {
		tid, sid := tracectx.CallIDs(e.Session, id)
		c = &openCall{first: e.GPos, span: Span{
			TraceID: tid, SpanID: sid, Kind: trace.SpanKindClient, Start: e.Time,
			Attrs: []attribute.KeyValue{
				attribute.String(keyMethod, methodToolsCall),
				attribute.String(keyOperation, operationExecTool),
				attribute.String(keyToolCallID, id),
				attribute.String(keySession, e.Session.String()),
				attribute.String(keyServer, e.Server),
			},
		}}
		m.calls[k] = c
	}
	return c
}

func (m *Mapper) callDecided(e events.Event, p *events.CallDecided, rec *Log) []Span {
	c := m.call(e, p.CallID)
	rec.TraceID, rec.SpanID = c.span.TraceID, c.span.SpanID
	c.span.Attrs = append(c.span.Attrs, attribute.String(keyDecision, p.Decision), attribute.String(keyApprovedBy, p.By),
		attribute.String(keyPolicy, p.Policy))
	if p.Reason != "" {
		c.span.Attrs = append(c.span.Attrs, attribute.String(keyDecisionReason, p.Reason))
	}
	// Decided in a trace of the caller's: a denied call, which has no
	// call.started, joins it here; an allowed one's call.started says
	// the same.
	joinCaller(c, rec, p.TraceParent, p.TraceState)
	if p.Decision != events.CallDeny {
		return nil
	}
	// A denied call is never sent: its span is the decision, at its time.
	c.span.Name = methodToolsCall + " " + p.Tool
	c.span.Attrs = append(c.span.Attrs, attribute.String(keyToolName, p.Tool), attribute.String(keyCatalogName, p.Name),
		attribute.String(keyErrorType, errorTypeDenied))
	c.span.End, c.span.Status, c.span.StatusMsg = e.Time, codes.Error, "denied by "+p.By
	delete(m.calls, callKey{e.Session, p.CallID})
	return []Span{c.span}
}

func (m *Mapper) callStarted(e events.Event, p *events.CallStarted, rec *Log) {
	c := m.call(e, p.CallID)
	rec.TraceID, rec.SpanID = c.span.TraceID, c.span.SpanID
	c.started, c.span.Start = true, e.Time
	c.span.Name = methodToolsCall + " " + p.Tool
	c.span.Attrs = append(c.span.Attrs, attribute.String(keyToolName, p.Tool), attribute.String(keyCatalogName, p.Name),
		attribute.Int64(keyArgsBytes, p.Args.Size))
	if p.Policy != "" && !hasKey(c.span.Attrs, keyPolicy) {
		c.span.Attrs = append(c.span.Attrs, attribute.String(keyPolicy, p.Policy))
	}
	if p.ApprovedBy != "" && !hasKey(c.span.Attrs, keyApprovedBy) {
		c.span.Attrs = append(c.span.Attrs, attribute.String(keyApprovedBy, p.ApprovedBy))
	}
	if p.Attempt != 0 {
		c.span.Attrs = append(c.span.Attrs, attribute.Int(keyAttempt, p.Attempt))
	}
	if p.Caller != "" {
		c.span.Attrs = append(c.span.Attrs, attribute.String(keyCaller, p.Caller))
	}
	joinCaller(c, rec, p.TraceParent, p.TraceState)
	if p.RetryOf != "" {
		// A retry joins its first try's trace (the caller's, if any: the
		// same as the retry's) and links that span.
		tid, first := tracectx.CallIDs(e.Session, p.RetryOf)
		if c.span.Parent.IsValid() {
			tid = c.span.TraceID
		}
		c.span.TraceID = tid
		rec.TraceID = tid
		c.span.Links = append(c.span.Links, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: first}))
		c.span.Attrs = append(c.span.Attrs, attribute.String(keyRetryOf, p.RetryOf))
	}
	if pr, ok := m.peers[connKey{e.Session, e.Server}]; ok {
		c.span.Attrs = append(c.span.Attrs, peerAttrs(pr)...)
	}
}

// joinCaller puts c's span, and rec, in the caller's trace that
// traceparent and tracestate (a call.decided's or call.started's) name,
// as a child of the caller's span (the upstream server was told c's span
// is its parent: tracectx.Upstream); without a valid traceparent the
// span keeps the ledger's own IDs.
func joinCaller(c *openCall, rec *Log, traceparent, tracestate string) {
	if parent, ok := tracectx.Parse(traceparent, tracestate); ok {
		c.span.TraceID, c.span.Parent = parent.TraceID(), parent
		rec.TraceID = parent.TraceID()
	}
}

func (m *Mapper) callFinished(e events.Event, p *events.CallFinished, rec *Log) []Span {
	k := callKey{e.Session, p.CallID}
	c := m.calls[k]
	if c == nil || !c.started {
		// Its call.started is not in what was read (before the cursor's
		// From, or archived): the record carries the call's IDs anyway.
		rec.TraceID, rec.SpanID = tracectx.CallIDs(e.Session, p.CallID)
		return nil
	}
	delete(m.calls, k)
	rec.TraceID, rec.SpanID = c.span.TraceID, c.span.SpanID
	s := c.span
	s.End = e.Time
	s.Attrs = append(s.Attrs, attribute.String(keyOutcome, p.Outcome), attribute.Int64(keyResultBytes, p.Result.Size))
	if p.Outcome != events.OutcomeOK {
		s.Attrs = append(s.Attrs, attribute.String(keyErrorType, p.Outcome))
		s.Status, s.StatusMsg = codes.Error, p.Error
		if s.StatusMsg == "" {
			s.StatusMsg = p.Outcome
		}
	}
	if p.Retrying {
		s.Attrs = append(s.Attrs, attribute.Bool(keyRetrying, true))
	}
	if p.WireBytes != 0 {
		s.Attrs = append(s.Attrs, attribute.Int64(keyWireBytes, p.WireBytes))
	}
	if p.CutChars != 0 {
		s.Attrs = append(s.Attrs, attribute.Int64(keyCutChars, p.CutChars))
	}
	if len(p.Signals) > 0 {
		s.Attrs = append(s.Attrs, attribute.StringSlice(keySignals, p.Signals))
		s.Events = append(s.Events, SpanEvent{Name: spanEventSignals, Time: e.Time,
			Attrs: []attribute.KeyValue{attribute.StringSlice(keySignals, p.Signals)}})
	}
	return []Span{s}
}

// transitioned opens a connection span when a server starts launching,
// adds each transition to it as an event, and ends it when the server
// stops or fails.
func (m *Mapper) transitioned(e events.Event, p *events.ServerTransitioned, rec *Log) []Span {
	k := connKey{e.Session, e.Server}
	c := m.conns[k]
	if c == nil {
		if p.To != events.StateLaunching {
			return nil
		}
		tid, sid := tracectx.EventIDs(e.ID)
		c = &openConn{key: k, first: e.GPos, span: Span{
			TraceID: tid, SpanID: sid, Name: connectionSpanName + e.Server, Kind: trace.SpanKindClient, Start: e.Time,
			Attrs: []attribute.KeyValue{
				attribute.String(keySession, e.Session.String()),
				attribute.String(keyServer, e.Server),
				attribute.Int(keyConnAttempt, p.Attempt),
			},
		}}
		m.conns[k] = c
		m.last[e.Session] = e.Time
	}
	rec.TraceID, rec.SpanID = c.span.TraceID, c.span.SpanID
	attrs := []attribute.KeyValue{
		attribute.String(keyFrom, string(p.From)), attribute.String(keyTo, string(p.To)),
		attribute.String(keyTrigger, p.Trigger), attribute.Int(keyConnAttempt, p.Attempt),
	}
	if p.Reason != "" {
		attrs = append(attrs, attribute.String(keyReason, string(p.Reason)))
	}
	if p.Error != nil {
		attrs = append(attrs, attribute.String(keyErrorClass, string(p.Error.Class)))
	}
	c.span.Events = append(c.span.Events, SpanEvent{Name: spanEventTransit, Time: e.Time, Attrs: attrs})
	switch p.To {
	case events.StateStopped, events.StateFailed:
	default:
		return nil
	}
	delete(m.conns, k)
	return []Span{m.endConn(c, e.Time, p)}
}

// sessionStarted ends the connection spans of earlier sessions, at their
// session's last event: one process holds a journal at a time, so a
// session that starts means the others ended (a killed one without a
// session.stopped).
func (m *Mapper) sessionStarted(e events.Event) []Span {
	var ended []Span
	for sid, at := range m.last {
		if sid != e.Session {
			ended = append(ended, m.sessionStopped(sid, at)...)
		}
	}
	slices.SortFunc(ended, func(a, b Span) int { return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.Name, b.Name)) })
	return ended
}

// sessionStopped ends the session's open connection spans at time at.
func (m *Mapper) sessionStopped(session uuid.UUID, at int64) []Span {
	var ended []Span
	delete(m.last, session)
	for k, c := range m.conns {
		if k.session == session {
			delete(m.conns, k)
			ended = append(ended, m.endConn(c, at, nil))
		}
	}
	// Map iteration order is random; the output is not.
	slices.SortFunc(ended, func(a, b Span) int { return strings.Compare(a.Name, b.Name) })
	return ended
}

func (m *Mapper) endConn(c *openConn, at int64, p *events.ServerTransitioned) Span {
	s := c.span
	s.End = at
	if pr, ok := m.peers[c.key]; ok {
		s.Attrs = append(s.Attrs, peerAttrs(pr)...)
	}
	if p != nil && p.To == events.StateFailed {
		s.Status, s.StatusMsg = codes.Error, "failed"
		if p.Error != nil {
			s.Attrs = append(s.Attrs, attribute.String(keyErrorType, string(p.Error.Class)))
			s.StatusMsg = p.Error.Message
		}
	}
	return s
}

func peerAttrs(p peer) []attribute.KeyValue {
	var out []attribute.KeyValue
	if p.protocol != "" {
		out = append(out, attribute.String(keyProtocol, p.protocol))
	}
	if p.mcpSession != "" {
		out = append(out, attribute.String(keyMCPSession, p.mcpSession))
	}
	if p.name != "" {
		out = append(out, attribute.String(keyServerName, p.name))
	}
	if p.version != "" {
		out = append(out, attribute.String(keyServerVersion, p.version))
	}
	return out
}

// logOf is e as a log record, without a span.
func logOf(e events.Event) Log {
	body, err := json.Marshal(e.Payload)
	if err != nil {
		body = []byte(`{"error":"payload not encodable"}`)
	}
	attrs := []attribute.KeyValue{
		attribute.String(keyEventID, e.ID.String()),
		attribute.String(keySession, e.Session.String()),
		attribute.Int64(keySeq, int64(e.Seq)),
		attribute.Int64(keyGPos, int64(e.GPos)),
		attribute.String(keyKind, string(e.Kind)),
	}
	if e.Server != "" {
		attrs = append(attrs, attribute.String(keyServer, e.Server))
	}
	if e.Cause != 0 {
		attrs = append(attrs, attribute.Int64(keyCause, int64(e.Cause)))
	}
	return Log{Time: e.Time, EventName: string(e.Kind), Severity: severityOf(e), Body: string(body), Attrs: attrs}
}

// severityOf is WARN for events that record something going wrong, INFO
// otherwise.
func severityOf(e events.Event) log.Severity {
	switch p := e.Payload.(type) {
	case *events.ConnectFailed, *events.AuthFailed, *events.GatewayRejected, *events.PingFailed:
		return log.SeverityWarn
	case *events.CallFinished:
		if p.Outcome != events.OutcomeOK {
			return log.SeverityWarn
		}
	case *events.CallDecided:
		if p.Decision == events.CallDeny {
			return log.SeverityWarn
		}
	case *events.ServerTransitioned:
		if p.To == events.StateFailed {
			return log.SeverityWarn
		}
	}
	return log.SeverityInfo
}

func hasKey(attrs []attribute.KeyValue, k attribute.Key) bool {
	for _, a := range attrs {
		if a.Key == k {
			return true
		}
	}
	return false
}
