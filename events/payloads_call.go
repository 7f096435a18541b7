package events

// The payloads of a tool call: call.decided, call.started and
// call.finished, and the capped JSON values they carry.

// Blob is a JSON value journaled with a cap: the (redacted) text up to the
// cap and the size of the whole. When the text is cut (Truncated), SHA256
// is the hex SHA-256 of the whole; a whole text carries no hash (journals
// written before 2026-11-22 have one on every blob).
type Blob struct {
	Text      string `msgpack:"text,omitempty" json:"text,omitempty"`
	Size      int64  `msgpack:"size" json:"size"`
	SHA256    string `msgpack:"sha256,omitempty" json:"sha256,omitempty"`
	Truncated bool   `msgpack:"truncated,omitempty" json:"truncated,omitempty"`
}

// CallStarted records a tool call about to be sent (Server on the envelope).
type CallStarted struct {
	CallID string `msgpack:"call_id" json:"call_id"`
	Tool   string `msgpack:"tool" json:"tool"`           // the server's own name for it
	Name   string `msgpack:"name,omitempty" json:"name"` // the catalog name the caller used
	Args   Blob   `msgpack:"args" json:"args"`
	Caller string `msgpack:"caller,omitempty" json:"caller,omitempty"`
	// Policy is the call policy that let the call through (always, ask);
	// ApprovedBy says who allowed it: "policy" for always, otherwise the
	// By of the call.decided that precedes it.
	Policy     string `msgpack:"policy,omitempty" json:"policy,omitempty"`
	ApprovedBy string `msgpack:"approved_by,omitempty" json:"approved_by,omitempty"`
	// DefHash is the tool definition's hash ([ToolDefHash]) the call was
	// made against.
	DefHash string `msgpack:"def_hash,omitempty" json:"def_hash,omitempty"`
	// Attempt is the server's connection attempt the request goes to.
	Attempt int `msgpack:"attempt,omitempty" json:"attempt,omitempty"`
	// RetryOf is the CallID of the earlier try this call retries after a
	// reconnect ("" for a first try).
	RetryOf string `msgpack:"retry_of,omitempty" json:"retry_of,omitempty"`
	// TraceParent and TraceState are the W3C trace context the caller made
	// the call in (since 2026-11-27; "" when none): the caller's trace ID
	// and its span, the parent of the ledger's span of the call, in
	// version 00 form (55 characters), and the validated tracestate (at
	// most 512 characters). A malformed traceparent is never journaled.
	TraceParent string `msgpack:"trace_parent,omitempty" json:"trace_parent,omitempty"`
	TraceState  string `msgpack:"trace_state,omitempty" json:"trace_state,omitempty"`
}

// Call outcomes.
const (
	OutcomeOK        = "ok"
	OutcomeToolError = "tool_error"
	OutcomeError     = "error"
	OutcomeCancelled = "cancelled"
	OutcomeTimeout   = "timeout"
	// OutcomeLost: the connection, or mcpledger itself (killed: the next
	// session records it), was lost with the request in flight; whether
	// the server acted on it is unknown.
	OutcomeLost = "lost"
	// OutcomeInvalidArgs: the arguments failed the tool's input schema
	// locally; the request was never sent.
	OutcomeInvalidArgs = "invalid_arguments"
	// OutcomeUnknownTool: the server said it has no such tool (a JSON-RPC
	// error or an isError result, normalized).
	OutcomeUnknownTool = "unknown_tool"
)

// Call decisions (CallDecided.Decision).
const (
	CallAllow = "allow"
	CallDeny  = "deny"
)

// CallDecided records whether a tool call may be sent, decided before the
// request exists: by the call policy ("never" denies), by an approver
// callback, or by the user (an explicit `mcpledger call`). It is an input:
// a fact from outside the decider. A denied call has no call.started.
type CallDecided struct {
	CallID   string `msgpack:"call_id" json:"call_id"`
	Tool     string `msgpack:"tool" json:"tool"`
	Name     string `msgpack:"name,omitempty" json:"name,omitempty"`
	Decision string `msgpack:"decision" json:"decision"` // allow, deny
	// By is "policy", "approver" (or "approver:WHO"), or "user:HOW".
	By string `msgpack:"by" json:"by"`
	// Policy is the call policy in force: never or ask.
	Policy  string `msgpack:"policy" json:"policy"`
	DefHash string `msgpack:"def_hash,omitempty" json:"def_hash,omitempty"`
	Reason  string `msgpack:"reason,omitempty" json:"reason,omitempty"`
	// TraceParent and TraceState are the W3C trace context the caller
	// made the call in, as on [CallStarted] (since 2026-11-27; "" when
	// none, and in journals written before): a denied call, which has no
	// call.started, joins the caller's trace by them.
	TraceParent string `msgpack:"trace_parent,omitempty" json:"trace_parent,omitempty"`
	TraceState  string `msgpack:"trace_state,omitempty" json:"trace_state,omitempty"`
}

// CallFinished records the result of a call.
type CallFinished struct {
	CallID  string `msgpack:"call_id" json:"call_id"`
	Outcome string `msgpack:"outcome" json:"outcome"`
	Error   string `msgpack:"error,omitempty" json:"error,omitempty"`
	// Result is the CallToolResult's JSON, redacted and capped: the bytes
	// the server sent over stdio and in-process connections (since
	// 2026-11-22), mcpledger's encoding of the decoded result over
	// Streamable HTTP and SSE, or of a result mcpledger made itself.
	Result     Blob  `msgpack:"result" json:"result"`
	DurationNs int64 `msgpack:"duration_ns" json:"duration_ns"`
	// Signals names the injection patterns found in the rendered output
	// (advisory: the output was not changed), sorted.
	Signals []string `msgpack:"signals,omitempty" json:"signals,omitempty"`
	// RenderedChars is the length in characters of the rendered output
	// and CutChars how many of them truncation removed.
	RenderedChars int64 `msgpack:"rendered_chars,omitempty" json:"rendered_chars,omitempty"`
	CutChars      int64 `msgpack:"cut_chars,omitempty" json:"cut_chars,omitempty"`
	// WireBytes, when set, is the size in bytes of the server's response,
	// which was over the runtime's message limit and was cut in transit
	// before it was decoded (since 2026-11-27): Result is then what was
	// kept of it, and RenderedChars the whole result's rendered length
	// when that is known (text blocks only), else the kept part's.
	WireBytes int64 `msgpack:"wire_bytes,omitempty" json:"wire_bytes,omitempty"`
	// Retrying is true when a reconnect and one retry (a new call.started
	// with RetryOf) follow this failure.
	Retrying bool `msgpack:"retrying,omitempty" json:"retrying,omitempty"`
}
