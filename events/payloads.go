package events

// Payload is the typed body of an event. Each kind has exactly one current
// payload struct; Kind reports it.
type Payload interface {
	Kind() Kind
}

// DeciderOptions are the decider's tunables, recorded in session.started so
// replay decides with the values the session used.
type DeciderOptions struct {
	BackoffBaseMs int64 `msgpack:"backoff_base_ms" json:"backoff_base_ms"`
	BackoffMaxMs  int64 `msgpack:"backoff_max_ms" json:"backoff_max_ms"`
	MaxAttempts   int   `msgpack:"max_attempts" json:"max_attempts"`
	StormLimit    int   `msgpack:"storm_limit" json:"storm_limit"`
	StormWindowMs int64 `msgpack:"storm_window_ms" json:"storm_window_ms"`
	PingFailures  int   `msgpack:"ping_failures" json:"ping_failures"`
	// StableMs: a server that stayed ready this long starts a fresh retry
	// budget when it next fails.
	StableMs        int64 `msgpack:"stable_ms" json:"stable_ms"`
	DecisionVersion int   `msgpack:"decision_version" json:"decision_version"`
}

// SessionStarted opens a session. Seed drives backoff jitter; Build and
// Version identify the code that decided.
type SessionStarted struct {
	Seed     uint64         `msgpack:"seed" json:"seed"`
	Build    string         `msgpack:"build" json:"build"`
	Version  string         `msgpack:"version" json:"version"`
	PID      int            `msgpack:"pid,omitempty" json:"pid,omitempty"`
	Host     string         `msgpack:"host,omitempty" json:"host,omitempty"`
	Command  string         `msgpack:"command,omitempty" json:"command,omitempty"`
	Options  DeciderOptions `msgpack:"options" json:"options"`
	Previous string         `msgpack:"previous,omitempty" json:"previous,omitempty"` // session ID found interrupted, if any
}

// StopRequested asks to stop one server (Server set on the envelope) or,
// with an empty server, the whole session.
type StopRequested struct {
	Reason Reason `msgpack:"reason" json:"reason"`
	By     string `msgpack:"by,omitempty" json:"by,omitempty"`
}

// ApprovalFact is what the runtime knew about a server's approval when it
// observed the config: the latest decision for (workspace, name), if any.
type ApprovalFact struct {
	Decision string `msgpack:"decision,omitempty" json:"decision,omitempty"` // "", approve, reject
	Hash     string `msgpack:"hash,omitempty" json:"hash,omitempty"`         // config hash the decision was bound to
	By       string `msgpack:"by,omitempty" json:"by,omitempty"`
	At       int64  `msgpack:"at,omitempty" json:"at,omitempty"`
	// Changed names the hashed fields that differ between the config the
	// decision was made for and the current one (empty when the hashes match).
	Changed []string `msgpack:"changed,omitempty" json:"changed,omitempty"`
	// ToolHashes are the tool definitions pinned under this approval
	// (name → ToolDefHash), sorted by name; empty until the first listing.
	ToolHashes []KV `msgpack:"tool_hashes,omitempty" json:"tool_hashes,omitempty"`
}

// ServerConfig is one server's configuration as written, with env and header
// values replaced by their digests (see [RedactKVs]). Facts the decider
// needs for admission travel with it.
type ServerConfig struct {
	Name            string    `msgpack:"name" json:"name"`
	Source          string    `msgpack:"source,omitempty" json:"source,omitempty"`
	Scope           Scope     `msgpack:"scope,omitempty" json:"scope,omitempty"`
	Transport       Transport `msgpack:"transport" json:"transport"`
	Command         string    `msgpack:"command,omitempty" json:"command,omitempty"`
	Args            []string  `msgpack:"args,omitempty" json:"args,omitempty"`
	Env             []KV      `msgpack:"env,omitempty" json:"env,omitempty"`
	Cwd             string    `msgpack:"cwd,omitempty" json:"cwd,omitempty"`
	URL             string    `msgpack:"url,omitempty" json:"url,omitempty"`
	Headers         []KV      `msgpack:"headers,omitempty" json:"headers,omitempty"`
	Disabled        bool      `msgpack:"disabled,omitempty" json:"disabled,omitempty"`
	TimeoutMs       int64     `msgpack:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
	ProtocolVersion string    `msgpack:"protocol_version,omitempty" json:"protocol_version,omitempty"`
	IncludeTools    []string  `msgpack:"include_tools,omitempty" json:"include_tools,omitempty"`
	ExcludeTools    []string  `msgpack:"exclude_tools,omitempty" json:"exclude_tools,omitempty"`
	// OAuth is a remote server's "oauth" object (nil when absent or empty),
	// its client secret replaced by a digest.
	OAuth *OAuthConfig `msgpack:"oauth,omitempty" json:"oauth,omitempty"`
	// Hash is ConfigHash of this config: what approvals bind to.
	Hash string `msgpack:"hash" json:"hash"`
	// Invalid is non-empty when the entry could not be used; it says why.
	Invalid string `msgpack:"invalid,omitempty" json:"invalid,omitempty"`
	// Gated is true when the scope needs an approval (project configs).
	Gated    bool         `msgpack:"gated,omitempty" json:"gated,omitempty"`
	Approval ApprovalFact `msgpack:"approval" json:"approval"`
	// RecentLaunches are launch times (unix ns) of this server taken from
	// earlier sessions in the journal, so the storm breaker survives restarts.
	RecentLaunches []int64 `msgpack:"recent_launches,omitempty" json:"recent_launches,omitempty"`
	// RecentCrashes are the times (unix ns) of this server's crashes in
	// earlier sessions since the last explicit reconnect, which the storm
	// breaker counts (decision version 2 on; version 1 counted
	// RecentLaunches).
	RecentCrashes []int64 `msgpack:"recent_crashes,omitempty" json:"recent_crashes,omitempty"`
}

// ConfigObserved is a complete reading of every config source: the
// servers, the gating lists and workspace trust. The decider diffs it
// against the previous reading to reconcile.
type ConfigObserved struct {
	Trigger   string `msgpack:"trigger" json:"trigger"` // start, watch, manual
	Workspace string `msgpack:"workspace,omitempty" json:"workspace,omitempty"`
	Trusted   bool   `msgpack:"trusted" json:"trusted"`
	// LaunchBound is the --allowed-servers upper bound; HasLaunchBound
	// distinguishes absent from empty.
	LaunchBound    []string `msgpack:"launch_bound,omitempty" json:"launch_bound,omitempty"`
	HasLaunchBound bool     `msgpack:"has_launch_bound,omitempty" json:"has_launch_bound,omitempty"`
	// Allowed is the settings allow-list; HasAllowed distinguishes absent
	// (allow all) from [] (deny all).
	Allowed    []string       `msgpack:"allowed" json:"allowed"` // nil = absent, [] = deny all
	HasAllowed bool           `msgpack:"has_allowed,omitempty" json:"has_allowed,omitempty"`
	Excluded   []string       `msgpack:"excluded,omitempty" json:"excluded,omitempty"`
	Servers    []ServerConfig `msgpack:"servers" json:"servers"`
	// Errors are source-level problems (a file that did not parse), each
	// "file:line:col: message".
	Errors []string `msgpack:"errors,omitempty" json:"errors,omitempty"`
	// Shadowed are the entries not used because a source of higher
	// priority defines a server of the same name, sorted by name then At.
	Shadowed []ShadowedServer `msgpack:"shadowed,omitempty" json:"shadowed,omitempty"`
}

// ShadowedServer is a server entry a config reading did not use: the
// first source that names a server wins it whole (see runtime/config).
type ShadowedServer struct {
	Name string `msgpack:"name" json:"name"`
	// At is where the unused entry is written ("file:line:col").
	At string `msgpack:"at" json:"at"`
	// Winner is where the entry in use is written ("file:line:col").
	Winner string `msgpack:"winner" json:"winner"`
}

// ApprovalDecided records a user's approve or reject of a gated server's
// config hash.
type ApprovalDecided struct {
	Workspace  string `msgpack:"workspace" json:"workspace"`
	Decision   string `msgpack:"decision" json:"decision"` // approve, reject
	Hash       string `msgpack:"hash" json:"hash"`
	By         string `msgpack:"by,omitempty" json:"by,omitempty"`
	Scope      Scope  `msgpack:"scope,omitempty" json:"scope,omitempty"`
	ToolHashes []KV   `msgpack:"tool_hashes,omitempty" json:"tool_hashes,omitempty"`
	// Config is the (redacted) config the decision was made for, so a later
	// change can be explained field by field.
	Config *ServerConfig `msgpack:"config,omitempty" json:"config,omitempty"`
}

// Approval decisions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// ReconnectRequested asks for an explicit reconnect of one server (Server on
// the envelope), or with an empty server of every failed one.
type ReconnectRequested struct {
	FailedOnly bool   `msgpack:"failed_only,omitempty" json:"failed_only,omitempty"`
	By         string `msgpack:"by,omitempty" json:"by,omitempty"`
}

// ProcessSpawned records that a stdio server's process started.
type ProcessSpawned struct {
	Attempt int    `msgpack:"attempt" json:"attempt"`
	PID     int    `msgpack:"pid" json:"pid"`
	PGID    int    `msgpack:"pgid,omitempty" json:"pgid,omitempty"`
	Command string `msgpack:"command,omitempty" json:"command,omitempty"`
}

// TransportOpened records that a non-stdio server's endpoint was reached
// (HTTP/SSE) or an in-process server was attached.
type TransportOpened struct {
	Attempt   int       `msgpack:"attempt" json:"attempt"`
	Transport Transport `msgpack:"transport" json:"transport"`
	Endpoint  string    `msgpack:"endpoint,omitempty" json:"endpoint,omitempty"`
}

// ConnectFailed records a failed attempt: spawn, connect or handshake.
type ConnectFailed struct {
	Attempt int             `msgpack:"attempt" json:"attempt"`
	Phase   string          `msgpack:"phase" json:"phase"` // spawn, connect, handshake, list
	Error   ClassifiedError `msgpack:"error" json:"error"`
}

// Capabilities is the subset of server capabilities mcpledger acts on.
type Capabilities struct {
	Tools               bool `msgpack:"tools,omitempty" json:"tools,omitempty"`
	ToolsListChanged    bool `msgpack:"tools_list_changed,omitempty" json:"tools_list_changed,omitempty"`
	Resources           bool `msgpack:"resources,omitempty" json:"resources,omitempty"`
	ResourcesSubscribe  bool `msgpack:"resources_subscribe,omitempty" json:"resources_subscribe,omitempty"`
	ResourcesListChange bool `msgpack:"resources_list_changed,omitempty" json:"resources_list_changed,omitempty"`
	Prompts             bool `msgpack:"prompts,omitempty" json:"prompts,omitempty"`
	PromptsListChanged  bool `msgpack:"prompts_list_changed,omitempty" json:"prompts_list_changed,omitempty"`
	Logging             bool `msgpack:"logging,omitempty" json:"logging,omitempty"`
	Completions         bool `msgpack:"completions,omitempty" json:"completions,omitempty"`
}

// HandshakeCompleted records the result of initialize.
type HandshakeCompleted struct {
	Attempt         int          `msgpack:"attempt" json:"attempt"`
	ProtocolVersion string       `msgpack:"protocol_version" json:"protocol_version"`
	ServerName      string       `msgpack:"server_name,omitempty" json:"server_name,omitempty"`
	ServerVersion   string       `msgpack:"server_version,omitempty" json:"server_version,omitempty"`
	Capabilities    Capabilities `msgpack:"capabilities" json:"capabilities"`
	Instructions    string       `msgpack:"instructions,omitempty" json:"instructions,omitempty"`
	SessionID       string       `msgpack:"session_id,omitempty" json:"session_id,omitempty"`
}

// ToolAnnotations are the behaviour hints a server gives for a tool. Nil
// means the server did not say.
type ToolAnnotations struct {
	ReadOnly    *bool `msgpack:"read_only,omitempty" json:"read_only,omitempty"`
	Destructive *bool `msgpack:"destructive,omitempty" json:"destructive,omitempty"`
	Idempotent  *bool `msgpack:"idempotent,omitempty" json:"idempotent,omitempty"`
	OpenWorld   *bool `msgpack:"open_world,omitempty" json:"open_world,omitempty"`
}

// Tool is one tool as a server listed it. Schemas are canonical JSON text.
type Tool struct {
	Name         string          `msgpack:"name" json:"name"`
	Title        string          `msgpack:"title,omitempty" json:"title,omitempty"`
	Description  string          `msgpack:"description,omitempty" json:"description,omitempty"`
	InputSchema  string          `msgpack:"input_schema,omitempty" json:"input_schema,omitempty"`
	OutputSchema string          `msgpack:"output_schema,omitempty" json:"output_schema,omitempty"`
	Annotations  ToolAnnotations `msgpack:"annotations" json:"annotations"`
	// DefHash is ToolDefHash(name, description, input schema).
	DefHash string `msgpack:"def_hash,omitempty" json:"def_hash,omitempty"`
}

// ToolsListed records a complete tools/list (all pages).
type ToolsListed struct {
	Attempt int    `msgpack:"attempt" json:"attempt"`
	Trigger string `msgpack:"trigger" json:"trigger"` // initial, list_changed, interval, refresh, listen_reopened
	Tools   []Tool `msgpack:"tools" json:"tools"`
	// ProtocolVersion is the MCP version of the session that listed the
	// tools (the handshake's): the tool cache keeps it, so that the next
	// connection to the same config skips the version negotiation. Empty
	// in records written before it was kept.
	ProtocolVersion string `msgpack:"protocol_version,omitempty" json:"protocol_version,omitempty"`
	// Excluded are the tools the server listed that were not taken, each
	// with the reason (an invalid x-mcp-header annotation): they are not
	// in Tools.
	Excluded []ExcludedTool `msgpack:"excluded,omitempty" json:"excluded,omitempty"`
}

// ExcludedTool is a listed tool that was left out of the catalog, and why.
type ExcludedTool struct {
	Name   string `msgpack:"name" json:"name"`
	Reason string `msgpack:"reason" json:"reason"`
}

// Resource is one resource a server listed.
type Resource struct {
	URI         string `msgpack:"uri" json:"uri"`
	Name        string `msgpack:"name,omitempty" json:"name,omitempty"`
	Description string `msgpack:"description,omitempty" json:"description,omitempty"`
	MIMEType    string `msgpack:"mime_type,omitempty" json:"mime_type,omitempty"`
}

// ResourceTemplate is one resource template a server listed.
type ResourceTemplate struct {
	URITemplate string `msgpack:"uri_template" json:"uri_template"`
	Name        string `msgpack:"name,omitempty" json:"name,omitempty"`
	Description string `msgpack:"description,omitempty" json:"description,omitempty"`
	MIMEType    string `msgpack:"mime_type,omitempty" json:"mime_type,omitempty"`
}

// ResourcesListed records resources/list and resources/templates/list.
// Listing is best-effort: Error says what failed, and the lists may be empty.
type ResourcesListed struct {
	Attempt   int                `msgpack:"attempt" json:"attempt"`
	Resources []Resource         `msgpack:"resources,omitempty" json:"resources,omitempty"`
	Templates []ResourceTemplate `msgpack:"templates,omitempty" json:"templates,omitempty"`
	Error     string             `msgpack:"error,omitempty" json:"error,omitempty"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string `msgpack:"name" json:"name"`
	Description string `msgpack:"description,omitempty" json:"description,omitempty"`
	Required    bool   `msgpack:"required,omitempty" json:"required,omitempty"`
}

// Prompt is one prompt a server listed.
type Prompt struct {
	Name        string           `msgpack:"name" json:"name"`
	Description string           `msgpack:"description,omitempty" json:"description,omitempty"`
	Arguments   []PromptArgument `msgpack:"arguments,omitempty" json:"arguments,omitempty"`
}

// PromptsListed records prompts/list (best-effort, like resources).
type PromptsListed struct {
	Attempt int      `msgpack:"attempt" json:"attempt"`
	Prompts []Prompt `msgpack:"prompts,omitempty" json:"prompts,omitempty"`
	Error   string   `msgpack:"error,omitempty" json:"error,omitempty"`
}

// PingFailed records a failed health ping; Consecutive counts failures in a
// row, as observed by the runtime. Class is set when the failure has one
// the decider acts on at once (ErrAuth: the server wants a sign-in);
// empty for a plain failure, which counts toward the streak.
type PingFailed struct {
	Attempt     int        `msgpack:"attempt" json:"attempt"`
	Consecutive int        `msgpack:"consecutive" json:"consecutive"`
	Error       string     `msgpack:"error,omitempty" json:"error,omitempty"`
	Class       ErrorClass `msgpack:"class,omitempty" json:"class,omitempty"`
}

// ProcessExited records a stdio server's process ending. Exactly one of
// ExitCode (with Signal empty) or Signal describes how.
type ProcessExited struct {
	Attempt    int      `msgpack:"attempt" json:"attempt"`
	PID        int      `msgpack:"pid" json:"pid"`
	ExitCode   int      `msgpack:"exit_code" json:"exit_code"`
	Signal     string   `msgpack:"signal,omitempty" json:"signal,omitempty"`
	StderrTail []string `msgpack:"stderr_tail,omitempty" json:"stderr_tail,omitempty"`
	// Expected is true when mcpledger itself asked the process to end.
	Expected bool `msgpack:"expected,omitempty" json:"expected,omitempty"`
}

// TransportClosed records that a session's connection ended.
type TransportClosed struct {
	Attempt  int             `msgpack:"attempt" json:"attempt"`
	Error    ClassifiedError `msgpack:"error" json:"error"`
	Expected bool            `msgpack:"expected,omitempty" json:"expected,omitempty"`
}

// OutputSkipped records lines a stdio server wrote on stdout that were not
// JSON-RPC messages (banners, logs): they are skipped so the session
// survives. The first lines are recorded one by one, then one record per
// thousand; Skipped counts every line skipped so far in the attempt.
type OutputSkipped struct {
	Attempt int    `msgpack:"attempt" json:"attempt"`
	Line    string `msgpack:"line" json:"line"` // capped at 256 bytes
	Skipped int    `msgpack:"skipped" json:"skipped"`
}

// Timer purposes.
const (
	TimerBackoff = "backoff"
	TimerHold    = "storm_hold"
)

// TimerFired records that a timer the decider scheduled went off.
type TimerFired struct {
	TimerID uint64 `msgpack:"timer_id" json:"timer_id"`
	Purpose string `msgpack:"purpose" json:"purpose"`
	Attempt int    `msgpack:"attempt" json:"attempt"`
}

// Reasons the gateway refuses a request (GatewayRejected.Reason).
const (
	RejectMissingToken = "missing_token"
	RejectWrongToken   = "wrong_token"
	RejectHost         = "host"
	RejectOrigin       = "origin"
	// RejectBusy: the gateway's budget of requests, request bytes or
	// sessions in flight is spent (503 with Retry-After).
	RejectBusy = "busy"
	// RejectSlowBody: a request's body did not arrive within the body
	// timeout (408).
	RejectSlowBody = "slow_body"
)

// GatewayRejected records a request the gateway refused before any MCP
// message in it was read: Status is the HTTP status it answered (401 for a
// missing or wrong bearer token, 403 for a Host or Origin it does not
// serve, 503 when its budget is spent, 408 for a body too slow). The token itself is never recorded. Rejections are journaled at
// a bounded rate; Suppressed counts those not journaled since the previous
// record.
type GatewayRejected struct {
	Remote     string `msgpack:"remote" json:"remote"`
	Reason     string `msgpack:"reason" json:"reason"`
	Status     int    `msgpack:"status" json:"status"`
	Method     string `msgpack:"method,omitempty" json:"method,omitempty"`
	Host       string `msgpack:"host,omitempty" json:"host,omitempty"`
	Origin     string `msgpack:"origin,omitempty" json:"origin,omitempty"`
	Suppressed int    `msgpack:"suppressed,omitempty" json:"suppressed,omitempty"`
}

// JournalArchived records that every record of the journal up to global
// position Through was moved into the sealed archive journal File (a path
// as given, relative to the journal's directory when not absolute): the
// sessions listed, each with its event count and hash-chain head as the
// live journal held them, and Digest, the SHA-256 of those records' bytes
// in log order (hex), so that the archive can be checked against the
// live journal. The live journal keeps, as its base, the fold of those
// records (approvals, tool cache, launches), so nothing still in force is
// lost.
type JournalArchived struct {
	File     string            `msgpack:"file" json:"file"`
	Through  uint64            `msgpack:"through" json:"through"`
	From     uint64            `msgpack:"from" json:"from"` // the first record archived
	Sessions []ArchivedSession `msgpack:"sessions" json:"sessions"`
	Digest   string            `msgpack:"digest" json:"digest"`
	Cutoff   int64             `msgpack:"cutoff,omitempty" json:"cutoff,omitempty"` // sessions ended before it (unix ns)
}

// JournalResumed records an outage of the journal: from Since to Until
// (unix ns) its appends failed (Error, the first failure), the Manager
// retried Attempts times, and refused callers meanwhile. Backlog
// observations that arrived during the outage follow it, in the order they
// arrived; Coalesced counts listings a later one of the same server
// superseded, Dropped the observations past the Manager's bound, which
// are lost, and LostRelaxed the relaxed call records that never reached
// the journal.
// The session's events before it are exactly those the journal held
// when it failed: nothing decided during the outage was acted on.
type JournalResumed struct {
	Since       int64  `msgpack:"since" json:"since"`
	Until       int64  `msgpack:"until" json:"until"`
	Error       string `msgpack:"error" json:"error"`
	Attempts    int    `msgpack:"attempts" json:"attempts"`
	Backlog     int    `msgpack:"backlog,omitempty" json:"backlog,omitempty"`
	Coalesced   int    `msgpack:"coalesced,omitempty" json:"coalesced,omitempty"`
	Dropped     int    `msgpack:"dropped,omitempty" json:"dropped,omitempty"`
	LostRelaxed int    `msgpack:"lost_relaxed,omitempty" json:"lost_relaxed,omitempty"`
}

// ArchivedSession is one session of a [JournalArchived].
type ArchivedSession struct {
	Session string `msgpack:"session" json:"session"`
	Events  uint64 `msgpack:"events" json:"events"`
	Head    string `msgpack:"head" json:"head"` // the hash-chain head, hex
}

// SessionStopped closes a session.
type SessionStopped struct {
	Reason Reason `msgpack:"reason" json:"reason"`
}

// Reload verdicts.
const (
	VerdictAdd     = "add"
	VerdictRemove  = "remove"
	VerdictRestart = "restart"
	VerdictKeep    = "keep"
	VerdictRepend  = "repend"
	VerdictAdmit   = "admit" // same config, admission changed to allowed
	VerdictDeny    = "deny"  // same config, admission changed to denied
)

// ReloadVerdict is what a reload decided for one server, with the config
// fingerprints before and after.
type ReloadVerdict struct {
	Server  string `msgpack:"server" json:"server"`
	Verdict string `msgpack:"verdict" json:"verdict"`
	Before  string `msgpack:"before,omitempty" json:"before,omitempty"`
	After   string `msgpack:"after,omitempty" json:"after,omitempty"`
}

// ReloadDecided lists every server's verdict for one config reading.
type ReloadDecided struct {
	Trigger  string          `msgpack:"trigger" json:"trigger"`
	Verdicts []ReloadVerdict `msgpack:"verdicts" json:"verdicts"`
}

// AdmissionDecided says whether a server may launch and, if not, why.
type AdmissionDecided struct {
	Admitted bool   `msgpack:"admitted" json:"admitted"`
	Reason   Reason `msgpack:"reason,omitempty" json:"reason,omitempty"`
	Hash     string `msgpack:"hash,omitempty" json:"hash,omitempty"`
	Detail   string `msgpack:"detail,omitempty" json:"detail,omitempty"`
}

// ServerTransitioned is one lifecycle transition.
type ServerTransitioned struct {
	From    ServerState      `msgpack:"from" json:"from"`
	To      ServerState      `msgpack:"to" json:"to"`
	Trigger string           `msgpack:"trigger" json:"trigger"`
	Reason  Reason           `msgpack:"reason,omitempty" json:"reason,omitempty"`
	Attempt int              `msgpack:"attempt" json:"attempt"`
	Error   *ClassifiedError `msgpack:"error,omitempty" json:"error,omitempty"`
}

// TimerScheduled asks the runtime to fire a timer after DelayMs; FireAt is
// the input's time plus the delay. Jitter is the part of the delay drawn
// from the session seed.
type TimerScheduled struct {
	TimerID uint64 `msgpack:"timer_id" json:"timer_id"`
	Purpose string `msgpack:"purpose" json:"purpose"`
	Attempt int    `msgpack:"attempt" json:"attempt"`
	Retry   int    `msgpack:"retry,omitempty" json:"retry,omitempty"`
	DelayMs int64  `msgpack:"delay_ms" json:"delay_ms"`
	CeilMs  int64  `msgpack:"ceil_ms,omitempty" json:"ceil_ms,omitempty"`
	FireAt  int64  `msgpack:"fire_at" json:"fire_at"`
}

// ApprovalRequested says a gated server waits for a decision (it is
// promptable). Previous is the hash of the last decision, if any, and
// Changed names the hashed fields that differ from it.
type ApprovalRequested struct {
	Workspace string   `msgpack:"workspace" json:"workspace"`
	Hash      string   `msgpack:"hash" json:"hash"`
	Scope     Scope    `msgpack:"scope,omitempty" json:"scope,omitempty"`
	Previous  string   `msgpack:"previous,omitempty" json:"previous,omitempty"`
	Changed   []string `msgpack:"changed,omitempty" json:"changed,omitempty"`
}

// ToolsPinned records the tool definitions an approval pins: at the first
// listing after an approval (trust on first use), or when a re-approval
// accepts changed definitions. Later listings are compared against them.
type ToolsPinned struct {
	Workspace string `msgpack:"workspace" json:"workspace"`
	Hash      string `msgpack:"hash" json:"hash"`   // the approved config hash
	Tools     []KV   `msgpack:"tools" json:"tools"` // name → ToolDefHash, sorted by name
}

// ToolChange is one tool whose listed definition differs from its pin.
// Pinned is "" for a tool the approval never saw; Listed is "" for a
// pinned tool no longer listed (informational: removal is not withheld).
type ToolChange struct {
	Name   string `msgpack:"name" json:"name"`
	Pinned string `msgpack:"pinned,omitempty" json:"pinned,omitempty"`
	Listed string `msgpack:"listed,omitempty" json:"listed,omitempty"`
}

// ToolsChanged records the set of an approved server's tools whose
// definitions no longer match the approval: those tools leave the catalog
// with reason tool_changed until re-approved. An empty Changed clears it.
type ToolsChanged struct {
	Changed []ToolChange `msgpack:"changed" json:"changed"`
}

// Kind implementations.
func (*SessionStarted) Kind() Kind     { return KindSessionStarted }
func (*StopRequested) Kind() Kind      { return KindStopRequested }
func (*ConfigObserved) Kind() Kind     { return KindConfigObserved }
func (*ApprovalDecided) Kind() Kind    { return KindApprovalDecided }
func (*ReconnectRequested) Kind() Kind { return KindReconnectRequested }
func (*ProcessSpawned) Kind() Kind     { return KindProcessSpawned }
func (*TransportOpened) Kind() Kind    { return KindTransportOpened }
func (*ConnectFailed) Kind() Kind      { return KindConnectFailed }
func (*HandshakeCompleted) Kind() Kind { return KindHandshakeCompleted }
func (*ToolsListed) Kind() Kind        { return KindToolsListed }
func (*ResourcesListed) Kind() Kind    { return KindResourcesListed }
func (*PromptsListed) Kind() Kind      { return KindPromptsListed }
func (*PingFailed) Kind() Kind         { return KindPingFailed }
func (*ProcessExited) Kind() Kind      { return KindProcessExited }
func (*TransportClosed) Kind() Kind    { return KindTransportClosed }
func (*TimerFired) Kind() Kind         { return KindTimerFired }
func (*OutputSkipped) Kind() Kind      { return KindOutputSkipped }
func (*CallStarted) Kind() Kind        { return KindCallStarted }
func (*CallFinished) Kind() Kind       { return KindCallFinished }
func (*CallDecided) Kind() Kind        { return KindCallDecided }
func (*GatewayRejected) Kind() Kind    { return KindGatewayRejected }
func (*JournalArchived) Kind() Kind    { return KindJournalArchived }
func (*JournalResumed) Kind() Kind     { return KindJournalResumed }
func (*SessionStopped) Kind() Kind     { return KindSessionStopped }
func (*ReloadDecided) Kind() Kind      { return KindReloadDecided }
func (*AdmissionDecided) Kind() Kind   { return KindAdmissionDecided }
func (*ServerTransitioned) Kind() Kind { return KindServerTransitioned }
func (*TimerScheduled) Kind() Kind     { return KindTimerScheduled }
func (*ApprovalRequested) Kind() Kind  { return KindApprovalRequested }
func (*ToolsPinned) Kind() Kind        { return KindToolsPinned }
func (*ToolsChanged) Kind() Kind       { return KindToolsChanged }
