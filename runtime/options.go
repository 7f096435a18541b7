package runtime

import (
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
)

// Durability says when a tool call's journal records must be durable.
type Durability int

const (
	// Audit (the default) journals a call's start durably before the request
	// is sent, and its result durably before the caller gets it.
	Audit Durability = iota
	// Relaxed lets call records ride the next commit: the request is sent
	// and the result returned without waiting for the disk.
	Relaxed
)

// DefaultProtocolVersion is the MCP protocol version the client pins by
// default (go-sdk-notes.md §0: v1.8.0 otherwise negotiates 2026-07-28,
// which silently disables keepalive and breaks ping on stateless HTTP).
const DefaultProtocolVersion = "2025-11-25"

// Options configure a Manager. The zero value is usable: every field has
// a documented default.
type Options struct {
	// Logger receives operational logs. Nil is silent.
	Logger *slog.Logger
	// Config loads the configuration. It is called at Start and on every
	// reload. Nil means no configured servers (only InProcess ones).
	Config func() LoadedConfig
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
	// PingInterval is the health ping period (default 30 s; <0 disables);
	// PingTimeout bounds each ping (default 5 s).
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
	// ProtocolVersion pinned on connect (default "2025-11-25"); a server's
	// "protocolVersion" overrides it.
	ProtocolVersion string
	// ClientName and ClientVersion identify mcpledger to servers.
	ClientName, ClientVersion string
	// Build and Version are recorded in session.started.
	Build, Version string
	// Command names what started the session ("run", "demo", …), recorded
	// in session.started.
	Command string
	// Now is the clock (default time.Now). Every event's time comes from it.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Config == nil {
		o.Config = func() LoadedConfig { return LoadedConfig{} }
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
	return o
}
