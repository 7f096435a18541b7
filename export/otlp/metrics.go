package otlp

import (
	"cmp"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mcpledger/mcpledger/events"
)

// Metric names: the OpenTelemetry MCP semantic conventions' where they
// name the thing, mcpledger's own otherwise.
const (
	MetricOperationDuration = "mcp.client.operation.duration"
	MetricSessionDuration   = "mcp.client.session.duration"
	MetricServers           = "mcpledger.servers"
	MetricReconnects        = "mcpledger.server.reconnects"
	MetricCallDecisions     = "mcpledger.call.decisions"
	MetricApprovals         = "mcpledger.approval.decisions"
)

const (
	keyTransport        = "network.transport"
	keyState            = "mcpledger.server.state"
	keyApprovalDecision = "mcpledger.approval.decision"
	// errorTypeInterrupted ends the MCP sessions of a session whose
	// mcpledger died without stopping (the next session's start says so).
	errorTypeInterrupted = "interrupted"
)

// durationBounds are the conventions' bucket boundaries for both
// duration histograms, in seconds.
var durationBounds = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// boundsNs are durationBounds in nanoseconds: the fold counts in integer
// nanoseconds, so its sums do not depend on float rounding.
var boundsNs = func() []int64 {
	out := make([]int64, len(durationBounds))
	for i, b := range durationBounds {
		out[i] = int64(b * 1e9)
	}
	return out
}()

// Metrics folds journal events, in global order, into cumulative metric
// values. It is pure: its points depend only on the events given, so the
// fold of a journal up to a position is the same whenever it is computed
// again (after a restart, a resend): a backend that takes the latest
// cumulative point counts nothing twice.
//
// Every point starts at the time of the first event folded (the
// journal's first: a journal archived in part starts later, which a
// backend sees as a reset) and is stamped with the time of the last
// event folded, made strictly increasing along the journal (an event no
// later than the one before counts 1 ns after it), so that a time names
// one position of the journal.
type Metrics struct {
	gpos        uint64
	start, now  int64
	ops         map[opSeries]*histogram
	sessions    map[sessSeries]*histogram
	reconnects  map[string]int64
	decisions   map[decisionSeries]int64
	approvals   map[approvalSeries]int64
	live        map[uuid.UUID]int64 // session → time of its last event
	servers     map[connKey]*serverOf
	calls       map[callKey]openOp
	statesKnown bool
}

// opSeries is the attributes of one mcp.client.operation.duration series.
type opSeries struct {
	server, tool, errType, protocol, transport string
}

type sessSeries struct {
	server, errType, protocol, transport string
}

type decisionSeries struct {
	server, decision, policy string
}

type approvalSeries struct {
	server, decision string
}

// serverOf is what the fold keeps of a server of a live session.
type serverOf struct {
	state     events.ServerState
	readyAt   int64 // when its MCP session became ready; 0: not ready
	protocol  string
	transport string
}

type openOp struct {
	tool string
	at   int64
}

// histogram is a cumulative histogram of durations in nanoseconds.
type histogram struct {
	count, sum, min, max int64
	buckets              []uint64
}

func (h *histogram) add(ns int64) {
	ns = max(ns, 0)
	if h.count == 0 || ns < h.min {
		h.min = ns
	}
	if h.count == 0 || ns > h.max {
		h.max = ns
	}
	h.count++
	h.sum += ns
	i, _ := slices.BinarySearch(boundsNs, ns) // bucket i holds (bound[i-1], bound[i]]
	h.buckets[i]++
}

// NewMetrics returns a fold that has seen no event.
func NewMetrics() *Metrics {
	return &Metrics{ops: map[opSeries]*histogram{}, sessions: map[sessSeries]*histogram{}, reconnects: map[string]int64{},
		decisions: map[decisionSeries]int64{}, approvals: map[approvalSeries]int64{}, live: map[uuid.UUID]int64{},
		servers: map[connKey]*serverOf{}, calls: map[callKey]openOp{}}
}

// GPos is the global position of the last event folded (0: none).
func (m *Metrics) GPos() uint64 { return m.gpos }

// Fold adds e, the event after the last one folded.
func (m *Metrics) Fold(e events.Event) {
	if m.gpos == 0 {
		m.start, m.now = e.Time, e.Time
	} else {
		// Strictly increasing: two positions never share a time, so two
		// points of a series at the same time always have the same value
		// (a resend in other batches cannot contradict what was sent).
		m.now = max(m.now+1, e.Time)
	}
	m.gpos = e.GPos
	if _, ok := e.Payload.(*events.SessionStarted); ok {
		// One process holds a journal at a time: a session that starts
		// means the others ended (a killed one without a session.stopped).
		for sid, at := range m.live {
			if sid != e.Session {
				m.endSession(sid, at, errorTypeInterrupted)
			}
		}
	}
	m.live[e.Session] = e.Time
	k := connKey{e.Session, e.Server}
	switch p := e.Payload.(type) {
	case *events.SessionStopped:
		m.endSession(e.Session, e.Time, "")
	case *events.ProcessSpawned:
		m.server(k).transport = "pipe" // stdio: no transport.opened
	case *events.TransportOpened:
		m.server(k).transport = transportOf(p.Transport)
	case *events.HandshakeCompleted:
		m.server(k).protocol = p.ProtocolVersion
	case *events.ServerTransitioned:
		m.transitioned(k, e.Time, p)
	case *events.CallStarted:
		m.calls[callKey{e.Session, p.CallID}] = openOp{tool: p.Tool, at: e.Time}
	case *events.CallFinished:
		m.callFinished(k, e, p)
	case *events.CallDecided:
		m.decisions[decisionSeries{e.Server, p.Decision, p.Policy}]++
	case *events.ApprovalDecided:
		m.approvals[approvalSeries{e.Server, p.Decision}]++
	}
}

func (m *Metrics) server(k connKey) *serverOf {
	s := m.servers[k]
	if s == nil {
		s = &serverOf{}
		m.servers[k] = s
	}
	return s
}

func (m *Metrics) transitioned(k connKey, at int64, p *events.ServerTransitioned) {
	m.statesKnown = true
	s := m.server(k)
	s.state = p.To
	if p.To == events.StateReconnecting {
		m.reconnects[k.server]++
	}
	switch {
	case p.To == events.StateReady && s.readyAt == 0:
		s.readyAt = at
	case p.To != events.StateReady && s.readyAt != 0:
		var errType string
		switch {
		case p.Error != nil:
			errType = string(p.Error.Class)
		case p.To == events.StateFailed || p.To == events.StateReconnecting:
			errType = p.Trigger
		}
		m.endMCPSession(k.server, s, at, errType)
	}
}

// endMCPSession records the MCP session of s, ready until at.
func (m *Metrics) endMCPSession(server string, s *serverOf, at int64, errType string) {
	ser := sessSeries{server: server, errType: errType, protocol: s.protocol, transport: s.transport}
	h := m.sessions[ser]
	if h == nil {
		h = &histogram{buckets: make([]uint64, len(boundsNs)+1)}
		m.sessions[ser] = h
	}
	h.add(at - s.readyAt)
	s.readyAt = 0
}

// endSession ends the session's MCP sessions at time at and forgets its
// servers and unfinished calls.
func (m *Metrics) endSession(session uuid.UUID, at int64, errType string) {
	delete(m.live, session)
	// Map order is random; the histograms' sums and counts are not.
	for k, s := range m.servers {
		if k.session != session {
			continue
		}
		if s.readyAt != 0 {
			m.endMCPSession(k.server, s, at, errType)
		}
		delete(m.servers, k)
	}
	for k := range m.calls {
		if k.session == session {
			delete(m.calls, k)
		}
	}
}

func (m *Metrics) callFinished(k connKey, e events.Event, p *events.CallFinished) {
	ck := callKey{e.Session, p.CallID}
	op, ok := m.calls[ck]
	if !ok {
		return // its call.started is not in what was folded (archived)
	}
	delete(m.calls, ck)
	ser := opSeries{server: e.Server, tool: op.tool}
	if p.Outcome != events.OutcomeOK {
		ser.errType = p.Outcome
	}
	if s := m.servers[k]; s != nil {
		ser.protocol, ser.transport = s.protocol, s.transport
	}
	h := m.ops[ser]
	if h == nil {
		h = &histogram{buckets: make([]uint64, len(boundsNs)+1)}
		m.ops[ser] = h
	}
	// The runtime's own measure of the request when it has one; the
	// events' times otherwise.
	d := p.DurationNs
	if d <= 0 {
		d = e.Time - op.at
	}
	h.add(d)
}

// transportOf is the conventions' network.transport of a transport ("":
// none applies).
func transportOf(t events.Transport) string {
	switch t {
	case events.TransportStdio:
		return "pipe"
	case events.TransportHTTP, events.TransportSSE:
		return "tcp"
	}
	return ""
}

// Points returns the cumulative points of every series at the last event
// folded, in a stable order; nil before any event.
func (m *Metrics) Points() []metricdata.Metrics {
	if m.gpos == 0 {
		return nil
	}
	start, now := time.Unix(0, m.start).UTC(), time.Unix(0, m.now).UTC()
	var out []metricdata.Metrics
	if len(m.ops) > 0 {
		out = append(out, metricdata.Metrics{Name: MetricOperationDuration, Unit: "s",
			Description: "The duration of the MCP request as observed on the sender from the time it was sent until the response was received.",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
				DataPoints: histPoints(m.ops, start, now, func(s opSeries) []attribute.KeyValue {
					kv := []attribute.KeyValue{attribute.String(keyMethod, methodToolsCall), attribute.String(keyOperation, operationExecTool),
						attribute.String(keyToolName, s.tool), attribute.String(keyServer, s.server)}
					return appendSet(kv, keyErrorType, s.errType, keyProtocol, s.protocol, keyTransport, s.transport)
				}, func(a, b opSeries) int {
					return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.tool, b.tool), cmp.Compare(a.errType, b.errType),
						cmp.Compare(a.protocol, b.protocol), cmp.Compare(a.transport, b.transport))
				})}})
	}
	if len(m.sessions) > 0 {
		out = append(out, metricdata.Metrics{Name: MetricSessionDuration, Unit: "s",
			Description: "The duration of the MCP session as observed on the MCP client: a server connection from ready to its end.",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
				DataPoints: histPoints(m.sessions, start, now, func(s sessSeries) []attribute.KeyValue {
					return appendSet([]attribute.KeyValue{attribute.String(keyServer, s.server)},
						keyErrorType, s.errType, keyProtocol, s.protocol, keyTransport, s.transport)
				}, func(a, b sessSeries) int {
					return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.errType, b.errType),
						cmp.Compare(a.protocol, b.protocol), cmp.Compare(a.transport, b.transport))
				})}})
	}
	if m.statesKnown {
		counts := map[events.ServerState]int64{}
		for _, s := range m.servers {
			counts[s.state]++
		}
		var pts []metricdata.DataPoint[int64]
		for _, st := range events.States() {
			pts = append(pts, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attribute.String(keyState, string(st))),
				Time: now, Value: counts[st]})
		}
		out = append(out, metricdata.Metrics{Name: MetricServers, Unit: "{server}",
			Description: "The servers of the running session in each lifecycle state.",
			Data:        metricdata.Gauge[int64]{DataPoints: pts}})
	}
	if len(m.reconnects) > 0 {
		out = append(out, counter(MetricReconnects, "{reconnect}", "Transitions of a server to reconnecting.",
			sumPoints(m.reconnects, start, now, func(s string) []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String(keyServer, s)}
			}, cmp.Compare[string])))
	}
	if len(m.decisions) > 0 {
		out = append(out, counter(MetricCallDecisions, "{decision}", "Decisions on tool calls under the ask or never policy, by outcome.",
			sumPoints(m.decisions, start, now, func(s decisionSeries) []attribute.KeyValue {
				return []attribute.KeyValue{attribute.String(keyServer, s.server), attribute.String(keyDecision, s.decision),
					attribute.String(keyPolicy, s.policy)}
			}, func(a, b decisionSeries) int {
				return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.decision, b.decision), cmp.Compare(a.policy, b.policy))
			})))
	}
	if len(m.approvals) > 0 {
		out = append(out, counter(MetricApprovals, "{decision}", "Decisions on servers' configurations (approve, reject).",
			sumPoints(m.approvals, start, now, func(s approvalSeries) []attribute.KeyValue {
				return appendSet([]attribute.KeyValue{attribute.String(keyApprovalDecision, s.decision)}, keyServer, s.server)
			}, func(a, b approvalSeries) int {
				return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.decision, b.decision))
			})))
	}
	return out
}

// appendSet appends the pairs (key, value) of kv whose value is not "".
func appendSet(out []attribute.KeyValue, kv ...string) []attribute.KeyValue {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			out = append(out, attribute.String(kv[i], kv[i+1]))
		}
	}
	return out
}

func counter(name, unit, desc string, pts []metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Name: name, Unit: unit, Description: desc,
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: pts}}
}

func histPoints[K comparable](series map[K]*histogram, start, now time.Time, attrs func(K) []attribute.KeyValue, order func(a, b K) int) []metricdata.HistogramDataPoint[float64] {
	keys := sortedKeys(series, order)
	out := make([]metricdata.HistogramDataPoint[float64], 0, len(keys))
	for _, k := range keys {
		h := series[k]
		out = append(out, metricdata.HistogramDataPoint[float64]{Attributes: attribute.NewSet(attrs(k)...), StartTime: start, Time: now,
			Count: uint64(h.count), Bounds: durationBounds, BucketCounts: slices.Clone(h.buckets),
			Min: metricdata.NewExtrema(seconds(h.min)), Max: metricdata.NewExtrema(seconds(h.max)), Sum: seconds(h.sum)})
	}
	return out
}

func sumPoints[K comparable](series map[K]int64, start, now time.Time, attrs func(K) []attribute.KeyValue, order func(a, b K) int) []metricdata.DataPoint[int64] {
	keys := sortedKeys(series, order)
	out := make([]metricdata.DataPoint[int64], 0, len(keys))
	for _, k := range keys {
		out = append(out, metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attrs(k)...), StartTime: start, Time: now, Value: series[k]})
	}
	return out
}

func sortedKeys[K comparable, V any](m map[K]V, order func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, order)
	return keys
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
