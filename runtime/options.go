package runtime

import (
	"context"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/config"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/runtime/oauth"
)

// Durability says when a tool call's journal records must be durable.
type Durability int

const (
	// Audit (the default) journals a call's start durably before the request
	// is sent, and its result durably before the caller gets it.
	Audit Durability = iota
	// Relaxed lets call records ride a later commit: the request is sent
	// and the result returned without waiting for the disk. The records of
	// calls are gathered for up to Options.RelaxedHold (50 ms; or 256
	// records, or until the next durable commit, or Close) and committed
	// together, so a crash can lose the records of the calls of that last
	// stretch.
	Relaxed
)

// ProtocolAuto is the protocol version setting that negotiates: MCP
// 2026-07-28 with a server that offers it (server/discover), 2025-11-25
// with one that does not (initialize after the failed discover). A server
// whose version the journal knows (the tool cache, for the same config)
// is connected to in that version at once: a 2025-11-25 server costs no
// discover round trip after its first connection. If such a connection
// fails in its handshake, the next attempt negotiates afresh.
const ProtocolAuto = "auto"

// DefaultProtocolVersion is the protocol version setting of a server that
// has none: [ProtocolAuto].
const DefaultProtocolVersion = ProtocolAuto

// Options configure a Manager. The zero value is usable: every field has
// a documented default.
type Options struct {
	// Logger receives operational logs. Nil is silent.
	Logger *slog.Logger
	// Config loads the configuration. It is called at Start and on every
	// reload. Nil means no configured servers (only InProcess ones).
	Config func() config.Reading
	// InProcess are go-sdk servers run in-process over in-memory
	// transports, supervised and journaled like any other (scope embedded).
	InProcess map[string]*mcp.Server
	// Decider tunes backoff, the storm breaker and ping failures; zero
	// fields take the fsm defaults. It is recorded in session.started.
	Decider events.DeciderOptions
	// Seed drives backoff jitter; 0 draws one at random (and records it).
	Seed uint64
	// StartupGate bounds how long Start waits for servers that have cached
	// tools (default 250 ms).
	StartupGate time.Duration
	// StartupTimeout bounds connect + initialize + first tools/list for one
	// attempt (default 30 s; a server's "timeout" overrides it).
	StartupTimeout time.Duration
	// PingInterval is the health check period (default 30 s; <0
	// disables): a ping, or on a 2026-07-28 session a server/discover
	// (probe.go); PingTimeout bounds each check (default 5 s).
	PingInterval time.Duration
	PingTimeout  time.Duration
	// CallTimeout bounds a tool call (default 60 s; a server's "timeout"
	// overrides it).
	CallTimeout time.Duration
	// ListTimeout bounds one listing of tools, resources or prompts
	// (default 30 s).
	ListTimeout time.Duration
	// RelistInterval re-lists tools periodically for servers that change
	// tools without notifying (default 0: only on list_changed).
	RelistInterval time.Duration
	// TerminateGrace is how long a stdio server gets after stdin closes,
	// and again after SIGTERM, before the group is killed (default 700 ms;
	// the whole escalation stays within about 2 s).
	TerminateGrace time.Duration
	// Watch reloads the configuration when one of its files changes
	// (fsnotify, debounced by Debounce, default 300 ms).
	Watch    bool
	Debounce time.Duration
	// Durability of tool-call records (default Audit).
	Durability Durability
	// RelaxedHold is how long, in Relaxed mode, call records are gathered
	// before they are committed together (default 50 ms; also at 256
	// records, at the next durable commit, and in Close). It bounds what a
	// crash loses. Each commit costs two fdatasyncs and their CPU: on the
	// 2-core dev VM a relaxed call took 1.8-1.9 x a direct one at p50 with
	// 2 ms, 1.1-1.6 x with 10 ms, 1.1-1.3 x with 50 ms (BENCHMARKS.md).
	RelaxedHold time.Duration
	// OAuthStore holds the sign-ins of remote servers that ask for OAuth
	// authorization (`mcpledger login`): requests to such a server carry
	// its token, refreshed as needed (see oauth_conn.go). Nil: no sign-in
	// is used, and a server that answers 401 fails like any other
	// handshake.
	OAuthStore *oauth.Store
	// ProtocolVersion is the MCP version to speak: "auto" (the default,
	// see [ProtocolAuto]) or a version to pin ("2025-11-25"); a server's
	// "protocolVersion" overrides it.
	ProtocolVersion string
	// ClientName and ClientVersion identify mcpledger to servers.
	ClientName, ClientVersion string
	// Build and Version are recorded in session.started.
	Build, Version string
	// Command names what started the session ("run", "demo", …), recorded
	// in session.started.
	Command string
	// ShimPath is an executable that acts as the reaper when started with
	// MCPLEDGER_SHIM=reaper (a program that calls RunShimIfRequested first
	// in main; mcpledger's CLI passes its own executable). With it, a stdio
	// server's whole process group ends even if this process is killed:
	// one helper process per Manager, started with the first stdio server.
	// Empty: a killed mcpledger still takes its servers down (parent-death
	// signal), but not their own children.
	ShimPath string
	// Now is the clock (default time.Now). Every event's time comes from it.
	Now func() time.Time

	// CallPolicy is the call policy of servers and tools whose config sets
	// none ("callPolicy", "toolPolicies"; default always). Under ask,
	// Approver decides; see [config.CallPolicy]. An unknown value is taken as ask.
	CallPolicy config.CallPolicy
	// Approver decides calls under policy ask (nil: such calls are denied,
	// unless the caller is the user: CallOptions.UserApproved).
	Approver Approver
	// MaxResultChars bounds the rendered text of a result
	// (CallResult.Text) and the result in its own shape
	// (CallResult.Bounded), in characters (default 50,000; <0: no bound),
	// for servers whose config sets no "maxResultChars". The cut is marked
	// with how much was removed.
	MaxResultChars int
	// WrapOutput wraps every rendered result in <mcp_tool_output
	// server="…" tool="…" trust="untrusted"> boundary markers.
	WrapOutput bool
	// JournalCap is how many bytes of a call's (redacted) arguments and
	// result are journaled; the rest is recorded by size and SHA-256
	// (default 64 KiB).
	JournalCap int
	// MaxMessageBytes bounds one message from a stdio server, and from
	// an HTTP server the answer to a tool call (a JSON body) and every SSE
	// event; default 16 MiB, go-sdk's own limit. A larger response to a
	// tool call is cut as it streams, without being held in memory: its
	// texts keep their first max(result bound,
	// guard.DefaultMaxResultChars) characters, later blocks, items and
	// members are dropped, and the call's result is marked with the size
	// the server sent (CallResult, and call.finished's WireBytes). A
	// larger response that cannot be cut (not valid JSON, a key or number
	// over 1 KiB, nesting over 256) or any other larger message is read
	// through and discarded, and only its call fails (ErrResultTooLarge);
	// the session stays up.
	MaxMessageBytes int
	// Retry sets how tools/list and ping retry on retriable transport
	// errors (zero fields take the defaults).
	Retry RetryOptions
	// CheckpointEvery is how many events may follow the journal's newest
	// checkpoint before the Manager saves another, at Start or Close,
	// when the journal keeps checkpoints ([CheckpointJournal]). 0 means
	// [CheckpointEvery]; negative, never.
	CheckpointEvery int

	// NewClient builds the MCP client of each server connection from the
	// options the Manager sets (nil: mcp.NewClient). A front end such as
	// the gateway (runtime/gateway's Bind sets it) uses it to advertise
	// sampling and elicitation and to forward them, progress, log messages
	// and resource updates to its own clients. It must keep the handlers
	// the Manager set in o (list changes), adding to them.
	NewClient func(server string, impl *mcp.Implementation, o *mcp.ClientOptions) *mcp.Client
	// PlainCall, with NewClient, reports whether a tool call made with
	// ctx needs nothing of the client's sending middleware. The Manager
	// sends such a call on a stdio or in-process connection itself,
	// around go-sdk's client (cheaper, same outcomes); without PlainCall
	// every call of a NewClient's client goes through go-sdk.
	//
	// On a 2026-07-28 session the answer of a plain call is the caller's
	// as it came, a result asking for input included, when the client
	// leaves input requests to its caller (ClientOptions.MultiRoundTrip
	// disabled, as the gateway's does); when go-sdk's client would answer
	// them itself (its default), a plain call whose answer asks for input
	// is made again through go-sdk's client, which does.
	PlainCall func(ctx context.Context) bool
	// CallMeta, with NewClient, is what the client's sending middleware
	// makes of the _meta of a plain call on a 2026-07-28 session: given
	// the _meta go-sdk's client would put on it (the protocol version,
	// client info and capabilities, and the call's trace), a map of the
	// caller's own, it returns the _meta to send (nil CallMeta: as given).
	CallMeta func(ctx context.Context, meta mcp.Meta) mcp.Meta
}

// RetryOptions set retries of tools/list and ping on retriable transport
// errors. (A tool call is retried at most once, after a reconnect, and
// only when that is safe; see Manager.CallToolWith.)
type RetryOptions struct {
	// Attempts is the number of tries in all (default 3; 1 disables).
	Attempts int
	// Backoff is the wait before the second try, doubling after each
	// (default 100 ms), up to MaxBackoff (default 2 s).
	Backoff, MaxBackoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Config == nil {
		o.Config = func() config.Reading { return config.Reading{} }
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = CheckpointEvery
	}
	if o.StartupGate <= 0 {
		o.StartupGate = 250 * time.Millisecond
	}
	if o.StartupTimeout <= 0 {
		o.StartupTimeout = 30 * time.Second
	}
	if o.PingInterval == 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 5 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 60 * time.Second
	}
	if o.ListTimeout <= 0 {
		o.ListTimeout = 30 * time.Second
	}
	if o.RelaxedHold <= 0 {
		o.RelaxedHold = 50 * time.Millisecond
	}
	if o.TerminateGrace <= 0 {
		o.TerminateGrace = 700 * time.Millisecond
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = DefaultProtocolVersion
	}
	if o.ClientName == "" {
		o.ClientName = "mcpledger"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.Version == "" {
		o.Version = o.ClientVersion
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.CallPolicy == "":
		o.CallPolicy = config.PolicyAlways
	case !o.CallPolicy.Valid():
		o.CallPolicy = config.PolicyAsk // an unknown policy fails safe
	}
	if o.MaxResultChars == 0 {
		o.MaxResultChars = guard.DefaultMaxResultChars
	}
	if o.JournalCap <= 0 {
		o.JournalCap = DefaultJournalCap
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.Retry.Attempts <= 0 {
		o.Retry.Attempts = 3
	}
	if o.Retry.Backoff <= 0 {
		o.Retry.Backoff = 100 * time.Millisecond
	}
	if o.Retry.MaxBackoff <= 0 {
		o.Retry.MaxBackoff = 2 * time.Second
	}
	return o
}
