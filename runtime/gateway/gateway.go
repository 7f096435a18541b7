package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/guard"
)

// gatewayProtocolVersions are the MCP versions the gateway speaks to its
// clients. 2026-07-28 requests are sessionless (stateless.go over HTTP);
// what a server asks of the client during a call (sampling, elicitation,
// roots) and approval by elicitation reach such a client as an
// input_required result (inputrequired.go), and a client of an older
// version as server-to-client requests.
var gatewayProtocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// Options configure a Gateway. The zero value is usable.
type Options struct {
	// Logger receives operational logs. Nil is silent.
	Logger *slog.Logger
	// PlainNames exposes every tool, prompt and resource under the name or
	// URI its server gave it, instead of namespaced (mcp__server__tool,
	// mcpledger://server/URI). Two servers offering the same name is an
	// error at Attach; a collision that appears later (a reload) keeps the
	// name with the server that had it and hides the newcomer's.
	PlainNames bool
	// Name and Version are the gateway's serverInfo (default "mcpledger",
	// "dev").
	Name, Version string
	// Instructions are sent to clients on initialize.
	Instructions string
	// ForwardTimeout bounds a sampling or elicitation request forwarded
	// from a server to a client (default 10 min: a person may be
	// answering).
	ForwardTimeout time.Duration
	// ApprovalTimeout bounds the elicitation that asks a client's user to
	// approve a call under policy ask (default 5 min); no answer denies.
	ApprovalTimeout time.Duration
	// SettleTimeout bounds how long Attach waits for ready servers to list
	// their resources and prompts (default 10 s).
	SettleTimeout time.Duration
	// Wrap answers every call with its result rendered as text between
	// untrusted-content markers (runtime.CallOptions.Wrap, as `mcpledger
	// call --wrap` prints it) instead of its blocks.
	Wrap bool
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Name == "" {
		o.Name = "mcpledger"
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.ForwardTimeout <= 0 {
		o.ForwardTimeout = 10 * time.Minute
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = 5 * time.Minute
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 10 * time.Second
	}
	return o
}

// Gateway exposes a Manager's live catalog as one MCP server (go-sdk
// mcp.Server) that any MCP client can connect to: over stdio
// (ServeStdio), Streamable HTTP (HTTPHandler) or any go-sdk transport
// (Server().Connect), in MCP 2026-07-28 (sessionless; over HTTP on the
// same endpoint as sessions, stateless.go), 2025-11-25, 2025-06-18,
// 2025-03-26 or 2024-11-05.
//
// Tools keep their servers' schemas; calls go through the Manager
// (validated, gated, journaled, redacted) with the client's identity
// ("name/version session=ID", or for 2026-07-28 "name/version
// mcp=VERSION caps=…") as the caller, and are answered with the
// result bounded in its own shape (runtime.CallResult.Bounded), its
// injection signals under _meta (MetaSignals), wrapped if Options.Wrap
// says so. Catalog changes reach clients
// as notifications/tools/list_changed. Resources, resource templates and
// prompts of ready servers are exposed too (folded from the session's
// resources.listed and prompts.listed events), and reads, prompts,
// completion and resource subscriptions pass through. Servers' sampling
// and elicitation requests (and, from 2026-07-28 servers, input_required
// results, inputrequired.go), progress and log messages are forwarded to
// clients; progress and cancellation flow both ways. Under call policy
// ask, the client's user is asked by elicitation (see Bind).
//
// # Usage
//
//	g := gateway.New(&gateway.Options{})
//	j = g.Bind(opts, j) // before runtime.New
//	m, _ := runtime.New(j, opts)
//	m.Start(ctx)
//	if err := g.Attach(ctx, m); err != nil { … }
//	g.ServeStdio(ctx, os.Stdin, os.Stdout) // or http.Serve(ln, g.HTTPHandler(…))
//	m.Shutdown("…"); g.Close()
//
// # Concurrency
//
// Every method is safe for concurrent use. The Gateway owns one goroutine
// that follows the Manager's views (Attach starts it, Close ends it) and a
// goroutine per in-flight log-level change; Close waits for all of them.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	server  *mcp.Server
	extras  *extrasCatalog
	m       atomic.Pointer[runtime.Manager]
	bound   atomic.Bool
	session atomic.Pointer[uuid.UUID] // the session appended through Bind's journal
	fast    fastCalls                 // tools/call answered by the fast path, in flight

	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	attached  atomic.Bool
	closeOnce sync.Once
	tokens    atomic.Uint64 // progress tokens sent upstream
	local     atomic.Uint64 // ids of sessions without an Mcp-Session-Id

	mu        sync.Mutex
	closed    bool
	tools     map[string]exposedTool // exposed name → tool
	lastTools []projections.Entry    // the catalog tools were last synced to
	resources map[string]exposedItem // exposed URI → resource
	templates map[string]exposedItem // exposed URI template → template
	prompts   map[string]exposedItem // exposed name → prompt
	hidden    map[string]bool        // collisions already logged
	callers   map[*mcp.ServerSession]string
	inflight  map[string][]*gwCall      // server → calls in flight, oldest first
	progress  map[string]*gwCall        // progress token sent upstream → call
	upTokens  map[string]*upstreamToken // progress token sent downstream → upstream's
	subs      map[exposedItem]int       // upstream subscriptions → downstream subscribers
	logLevel  mcp.LoggingLevel          // most verbose level a client asked for
	levelSent map[string]int            // server → attempt the level was sent to
	rej       rejectLimiter
	stateKey  [32]byte // seals the requestState of input_required results

	impl       *mcp.Implementation // the gateway's name and version, as its server says them
	noFast2026 bool                // tests: every 2026-07-28 call through go-sdk's stateless handler
}

// New returns a Gateway. It serves nothing until Attach.
func New(opts *Options) *Gateway {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gateway{opts: o, log: o.Logger, extras: newExtrasCatalog(), ctx: ctx, cancel: cancel,
		tools: map[string]exposedTool{}, resources: map[string]exposedItem{}, templates: map[string]exposedItem{},
		prompts: map[string]exposedItem{}, hidden: map[string]bool{}, callers: map[*mcp.ServerSession]string{},
		inflight: map[string][]*gwCall{}, progress: map[string]*gwCall{}, upTokens: map[string]*upstreamToken{},
		subs: map[exposedItem]int{}, levelSent: map[string]int{}}
	_, _ = rand.Read(g.stateKey[:]) // never fails (crypto/rand)
	g.impl = &mcp.Implementation{Name: o.Name, Version: o.Version}
	g.server = mcp.NewServer(g.impl, &mcp.ServerOptions{
		Instructions: o.Instructions,
		Logger:       o.Logger,
		// The catalog changes while clients are connected: advertise every
		// feature with list_changed from the start (a server without tools at
		// connect would otherwise advertise none, go-sdk-notes.md §6.10).
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
		},
		SupportedProtocolVersions:   gatewayProtocolVersions,
		CompletionHandler:           g.complete,
		SubscribeHandler:            g.subscribe,
		UnsubscribeHandler:          g.unsubscribe,
		ProgressNotificationHandler: g.downstreamProgress,
		InitializedHandler:          g.initialized,
	})
	g.server.AddReceivingMiddleware(g.setLevelMiddleware, g.startingMiddleware)
	g.server.AddSendingMiddleware(rawSchemaMiddleware)
	return g
}

// Server returns the gateway's MCP server, to connect clients over other
// transports (mcp.NewInMemoryTransports in tests).
func (g *Gateway) Server() *mcp.Server { return g.server }

// Bind prepares the options and journal of the Manager g will
// front, and must be called before runtime.New: it sets o.NewClient (so
// the Manager's clients advertise sampling and elicitation and forward
// them, with progress, log messages and resource updates, to g) and, if o.Approver is
// nil, makes g the approver of calls under policy ask: the client that
// made the call is asked by elicitation, and a client without the
// elicitation capability gets a denial saying so. It returns the journal to
// give runtime.New: j, with the session's events also folded into g's
// resources and prompts.
//
// The Manager may send a call around the client's sending middleware
// (runtime.Options.PlainCall) when the middleware has no part in it: no
// client progress token to map (progressMiddleware), and a client's round
// with no answers or state to carry (roundMiddleware; a call that is no
// client's is left to it, which fails it if the server asks for input).
// roundMiddleware's other part, the client's capabilities and log level in
// a 2026-07-28 request's _meta, the Manager takes from
// runtime.Options.CallMeta.
func (g *Gateway) Bind(o *runtime.Options, j runtime.Journal) runtime.Journal {
	o.NewClient = g.newClient
	o.PlainCall = plainCall
	o.CallMeta = callMeta
	if o.Approver == nil {
		o.Approver = g.approve
	}
	g.bound.Store(true)
	return teeJournal{Journal: j, g: g}
}

// journaled notes that the Manager appended to session through Bind's
// journal.
func (g *Gateway) journaled(session uuid.UUID) {
	if p := g.session.Load(); p == nil || *p != session {
		g.session.Store(&session)
	}
}

// Attach starts serving m's catalog, which must have been created with
// the options and journal of Bind and started. It waits (up to
// SettleTimeout) for ready servers to list their resources and prompts,
// and with PlainNames refuses names that two servers share, naming both.
func (g *Gateway) Attach(ctx context.Context, m *runtime.Manager) error {
	if !g.bound.Load() {
		return errors.New("gateway: Attach before Bind: create the Manager with the options and journal Bind returns")
	}
	if p := g.session.Load(); p == nil || *p != m.Session() {
		return fmt.Errorf("gateway: %w, or it was created without the journal Bind returns", runtime.ErrNotStarted)
	}
	if g.attached.Swap(true) {
		return errors.New("gateway: already attached")
	}
	g.m.Store(m)
	g.waitSettled(ctx)
	v := m.Snapshot()
	if g.opts.PlainNames {
		if err := g.collisions(v); err != nil {
			return err
		}
	}
	g.syncTools(v)
	g.syncExtras()
	views, cancel := m.Subscribe()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer cancel()
		g.follow(views)
	}()
	return nil
}

// waitSettled waits until every ready server has listed the resources and
// prompts its capabilities promise, or SettleTimeout passes.
func (g *Gateway) waitSettled(ctx context.Context) {
	t := time.NewTimer(g.opts.SettleTimeout)
	defer t.Stop()
	for {
		if _, _, ok := g.extras.snapshot(); ok {
			return
		}
		select {
		case <-g.extras.changed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// follow keeps the exposed catalog in step with the Manager until Close.
func (g *Gateway) follow(views <-chan *runtime.View) {
	for {
		select {
		case v := <-views:
			g.syncTools(v)
		case <-g.extras.changed:
			g.syncExtras()
		case <-g.ctx.Done():
			return
		}
	}
}

// ServeStdio serves one client over r and w (newline-delimited JSON-RPC,
// as MCP stdio) until the client closes r or ctx ends.
func (g *Gateway) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	rc, ok := r.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(r)
	}
	err := g.server.Run(ctx, &mcp.IOTransport{Reader: rc, Writer: nopWriteCloser{w}})
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Close ends the gateway: calls in flight through it are cancelled, client
// sessions are closed (waiting at most 2 s for each), and its goroutines
// are waited for. Close the Manager separately (before Close, so that
// calls in flight fail with runtime.ErrShuttingDown rather than as cancelled).
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		g.cancel()
		var wg sync.WaitGroup
		for ss := range g.server.Sessions() {
			wg.Add(1)
			go func() { // bounded: the session's handlers end with g.ctx
				defer wg.Done()
				_ = ss.Close()
			}()
		}
		closed := make(chan struct{})
		go func() { // ends when the sessions' closes do
			wg.Wait()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(2 * time.Second):
		}
		g.wg.Wait()
	})
	return nil
}

// initialized records a client's identity once its session is initialized.
func (g *Gateway) initialized(_ context.Context, req *mcp.InitializedRequest) {
	ss := req.Session
	id := ss.ID()
	if id == "" {
		id = strconv.FormatUint(g.local.Add(1), 10)
	}
	name, ver := "unknown", ""
	if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
		name, ver = ip.ClientInfo.Name, ip.ClientInfo.Version
	}
	who := fmt.Sprintf("%s/%s session=%s", guard.OneLine(name), guard.OneLine(ver), id)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.callers[ss] = who
	g.wg.Add(1)
	go func() { // ends when the session does (Close closes them all)
		defer g.wg.Done()
		_ = ss.Wait()
		g.mu.Lock()
		delete(g.callers, ss)
		g.mu.Unlock()
	}()
}

// caller returns the identity of the client of ss: "name/version
// session=ID" for a session, and for a client of 2026-07-28 (no session)
// "name/version mcp=VERSION caps=…", the version and the capabilities
// (of those the gateway acts on) its request declared.
func (g *Gateway) caller(c client) string {
	if ip := c.InitializeParams(); ip != nil && ip.ProtocolVersion >= protocolVersion2026 {
		name, ver := "unknown", ""
		if ip.ClientInfo != nil {
			name, ver = ip.ClientInfo.Name, ip.ClientInfo.Version
		}
		return fmt.Sprintf("%s/%s mcp=%s caps=%s", guard.OneLine(name), guard.OneLine(ver), guard.OneLine(ip.ProtocolVersion), capNames(ip.Capabilities))
	}
	ss, _ := c.(*mcp.ServerSession)
	g.mu.Lock()
	who, ok := g.callers[ss]
	g.mu.Unlock()
	if ok {
		return who
	}
	name := "unknown"
	if ip := c.InitializeParams(); ip != nil && ip.ClientInfo != nil {
		name = guard.OneLine(ip.ClientInfo.Name) + "/" + guard.OneLine(ip.ClientInfo.Version)
	}
	return name + " session=" + c.ID()
}

// capNames lists the client capabilities the gateway acts on that c
// declares, comma-separated ("none" if none).
func capNames(c *mcp.ClientCapabilities) string {
	var names []string
	if c != nil {
		if c.Elicitation != nil {
			names = append(names, "elicitation")
		}
		if c.RootsV2 != nil || c.Roots.ListChanged {
			names = append(names, "roots")
		}
		if c.Sampling != nil {
			names = append(names, "sampling")
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}
