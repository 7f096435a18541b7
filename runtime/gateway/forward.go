package gateway

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Forwarding between the supervised servers ("upstream") and the
// gateway's clients ("downstream"). A server's sampling and elicitation
// requests go to the client whose tool call to that server is in flight
// (the newest one that declared the capability), or to the only client
// connected; otherwise they are refused with an error saying why. Progress
// notifications and cancellation pass both ways; log messages go to every
// client at the level it set (servers are asked for the most verbose level
// any client set); resource updates go to subscribed clients.

// notifyTimeout bounds one notification forwarded to a client or server.
const notifyTimeout = 5 * time.Second

// newClient builds the MCP client of one connection to server. Without a
// gateway (g == nil) it is mcp.NewClient. With one, the client also
// advertises sampling and elicitation and forwards them, progress, log
// messages and resource updates to g's clients, and carries the progress
// tokens of g's clients' tool calls upstream.
func (g *Gateway) newClient(server string, impl *mcp.Implementation, o *mcp.ClientOptions) *mcp.Client {
	if g == nil {
		return mcp.NewClient(impl, o)
	}
	o.CreateMessageHandler = func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return g.forwardSampling(ctx, server, req)
	}
	o.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return g.forwardElicitation(ctx, server, req)
	}
	o.ProgressNotificationHandler = func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
		g.upstreamProgress(ctx, req.Params)
	}
	o.LoggingMessageHandler = func(ctx context.Context, req *mcp.LoggingMessageRequest) {
		g.upstreamLog(ctx, server, req.Params)
	}
	o.ResourceUpdatedHandler = func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		g.upstreamUpdated(ctx, server, req.Params)
	}
	// Input requests of 2026-07-28 servers come to the gateway
	// (inputrequired.go), not to go-sdk's answering and retrying.
	o.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	c := mcp.NewClient(impl, o)
	c.AddSendingMiddleware(g.progressMiddleware, roundMiddleware)
	c.AddReceivingMiddleware(g.elicitMiddleware(server))
	return c
}

// Elicitation schemas pass through unvalidated. go-sdk's client refuses,
// before any handler runs, form schemas its validator does not know, such
// as a titled multi-select whose items say "type": "string" next to
// "anyOf" (which go-sdk's own conformance everything-server sends), and
// its ServerSession.Elicit re-validates the client's answer against the
// same validator. The gateway is not the party that asked: the server
// validates its answer itself. So elicitation/create is taken from the
// server before go-sdk's client validates it (elicitMiddleware), and sent
// to the client with the schema put back on the wire by a sending
// middleware (rawSchemaMiddleware) while ServerSession.Elicit sees none.

type rawSchemaKey struct{}

// elicitMiddleware handles a server's elicitation/create itself.
func (g *Gateway) elicitMiddleware(server string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.ElicitRequest); ok && method == "elicitation/create" && r.Params != nil {
				return g.forwardElicitation(ctx, server, r)
			}
			return next(ctx, method, req)
		}
	}
}

// rawSchemaMiddleware puts the schema of a forwarded elicitation back on
// the request sent to the client.
func rawSchemaMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		schema := ctx.Value(rawSchemaKey{})
		if method != "elicitation/create" || schema == nil {
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.ServerRequest[mcp.Params])
		if !ok {
			return next(ctx, method, req)
		}
		p, ok := r.Params.(*mcp.ElicitParams)
		if !ok {
			return next(ctx, method, req)
		}
		cp := *p
		cp.RequestedSchema = schema
		return next(ctx, method, &mcp.ServerRequest[mcp.Params]{Session: r.Session, Params: &cp, Extra: r.Extra})
	}
}

// progressMiddleware gives a tools/call made for a gateway client that
// asked for progress a token of its own (clients' tokens may clash), and
// maps it back while the call is in flight.
func (g *Gateway) progressMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		gc := callOf(ctx)
		if method != "tools/call" || gc == nil || gc.token == nil {
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.ClientRequest[mcp.Params])
		if !ok {
			return next(ctx, method, req)
		}
		cp, ok := r.Params.(*mcp.CallToolParams)
		if !ok {
			return next(ctx, method, req)
		}
		tok := "mcpledger-" + strconv.FormatUint(g.tokens.Add(1), 10)
		p := *cp
		p.Meta = maps.Clone(p.Meta)
		if p.Meta == nil {
			p.Meta = mcp.Meta{}
		}
		p.Meta["progressToken"] = tok
		g.mu.Lock()
		g.progress[tok] = gc
		gc.sent = append(gc.sent, tok) // forgotten when the call ends (see linger)
		g.mu.Unlock()
		return next(ctx, method, &mcp.ClientRequest[mcp.Params]{Session: r.Session, Params: &p})
	}
}

// upstreamProgress forwards a server's progress on a call to the client
// that made it, under the client's token.
func (g *Gateway) upstreamProgress(_ context.Context, p *mcp.ProgressNotificationParams) {
	tok, _ := p.ProgressToken.(string)
	g.mu.Lock()
	gc := g.progress[tok]
	if gc != nil {
		gc.forwarding++
	}
	g.mu.Unlock()
	if gc == nil {
		return
	}
	out := *p
	out.Meta, out.ProgressToken = nil, gc.token
	ctx, cancel := context.WithTimeout(gc.rel, notifyTimeout)
	_ = gc.ss.NotifyProgress(ctx, &out)
	cancel()
	g.mu.Lock()
	gc.forwarding--
	gc.lastProgress = time.Now()
	g.mu.Unlock()
}

// Lingering for late progress. go-sdk hands a response to its caller as
// soon as it is read, while notifications read before it wait in the
// session's handler queue: a server's last progress notifications can be
// handled after its result. A call that asked for progress therefore
// answers only once its progress forwarding has been idle for
// progressQuiet (at most progressLinger after the result), so the client
// gets them before the result, as the server sent them. So does a call of
// a 2026-07-28 client that asked for log messages (a log level in its
// _meta): its request's stream is the only way they reach it.
const (
	progressQuiet  = 10 * time.Millisecond
	progressLinger = 250 * time.Millisecond
)

// linger waits for gc's progress forwarding to settle, then forgets its
// tokens.
func (g *Gateway) linger(gc *gwCall) {
	if gc.token == nil && !gc.logs {
		return
	}
	g.settle(func() (int, time.Time) { return gc.forwarding, gc.lastProgress })
	g.mu.Lock()
	for _, tok := range gc.sent {
		delete(g.progress, tok)
	}
	g.mu.Unlock()
}

// settle waits until state (read under g.mu) shows no forwarding in
// progress and none for progressQuiet, or progressLinger has passed.
func (g *Gateway) settle(state func() (forwarding int, last time.Time)) {
	start := time.Now()
	for {
		g.mu.Lock()
		n, last := state()
		closed := g.closed
		g.mu.Unlock()
		if last.IsZero() {
			last = start
		}
		if n == 0 && time.Since(last) >= progressQuiet || time.Since(start) >= progressLinger || closed {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// upstreamToken is the progress token a server put on a request the
// gateway forwarded to a client.
type upstreamToken struct {
	cs    *mcp.ClientSession
	token any
	// Guarded by Gateway.mu: progress forwarding in flight and the last
	// one (see linger).
	forwarding int
	last       time.Time
}

// relayToken replaces the server's progress token in meta (if any) by a
// gateway token and maps it back until done.
func (g *Gateway) relayToken(cs *mcp.ClientSession, meta mcp.Meta) (mcp.Meta, func()) {
	orig, ok := meta["progressToken"]
	if !ok || orig == nil {
		return meta, func() {}
	}
	tok := "mcpledger-up-" + strconv.FormatUint(g.tokens.Add(1), 10)
	meta = maps.Clone(meta)
	meta["progressToken"] = tok
	up := &upstreamToken{cs: cs, token: orig}
	g.mu.Lock()
	g.upTokens[tok] = up
	g.mu.Unlock()
	return meta, func() {
		// The client's last progress may be handled after its answer
		// (see linger): forward it before answering the server.
		g.settle(func() (int, time.Time) { return up.forwarding, up.last })
		g.mu.Lock()
		delete(g.upTokens, tok)
		g.mu.Unlock()
	}
}

// downstreamProgress forwards a client's progress on a request a server
// made (through the gateway) to that server, under the server's token.
func (g *Gateway) downstreamProgress(ctx context.Context, req *mcp.ProgressNotificationServerRequest) {
	tok, _ := req.Params.ProgressToken.(string)
	g.mu.Lock()
	up := g.upTokens[tok]
	if up != nil {
		up.forwarding++
	}
	g.mu.Unlock()
	if up == nil {
		return
	}
	out := *req.Params
	out.Meta, out.ProgressToken = nil, up.token
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
	_ = up.cs.NotifyProgress(ctx, &out)
	cancel()
	g.mu.Lock()
	up.forwarding--
	up.last = time.Now()
	g.mu.Unlock()
}

// downstreamFor picks the client to forward a server's request to (see
// the comment at the top of this file), or says why there is none.
// A client of 2026-07-28 takes no requests (only input_required results,
// which a server of 2025-11-25 does not send): it is never picked.
func (g *Gateway) downstreamFor(server, what string, has func(*mcp.ClientCapabilities) bool) (*mcp.ServerSession, *gwCall, error) {
	able := func(c client) bool { return !inputRequired(c) && has(capsOf(c)) }
	g.mu.Lock()
	calls := g.inflight[server]
	var newest *gwCall
	if n := len(calls); n > 0 {
		newest = calls[n-1]
	}
	for i := len(calls) - 1; i >= 0; i-- {
		if able(calls[i].peer) { // a 2025-11-25 client: gc.ss is its session
			gc := calls[i]
			g.mu.Unlock()
			return gc.ss, gc, nil
		}
	}
	g.mu.Unlock()
	var who client
	if newest != nil {
		who = newest.peer
	} else {
		var all []*mcp.ServerSession
		for s := range g.server.Sessions() {
			all = append(all, s)
		}
		if len(all) != 1 {
			return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
				"mcpledger: server %q asked for %s with no tool call of it in flight, and %d clients are connected to the gateway: there is no client to ask", server, what, len(all))}
		}
		if able(all[0]) {
			return all[0], nil, nil
		}
		who = all[0]
	}
	if inputRequired(who) {
		return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
			"mcpledger: server %q asked for %s by a request, but the client (%s) speaks MCP 2026-07-28, which takes only input_required results; "+
				"the request was refused: if the server speaks 2026-07-28, set its \"protocolVersion\" to \"2026-07-28\" (or \"auto\")", server, what, g.caller(who))}
	}
	return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
		"mcpledger: server %q asked for %s, but the client (%s) did not declare the %s capability; the request was refused", server, what, g.caller(who), what)}
}

func capsOf(c client) *mcp.ClientCapabilities {
	if ip := c.InitializeParams(); ip != nil && ip.Capabilities != nil {
		return ip.Capabilities
	}
	return &mcp.ClientCapabilities{}
}

// forwardContext returns the context of a request forwarded to a client:
// cancelled when the server's request is (go-sdk then sends the client
// notifications/cancelled) or after d, and carrying the values of the
// client's tool call, so that over Streamable HTTP the request travels on
// that call's stream.
func (g *Gateway) forwardContext(up context.Context, gc *gwCall, d time.Duration) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(up)
	if gc != nil {
		base = gc.rel
	}
	ctx, cancel := context.WithTimeout(base, d)
	stop := context.AfterFunc(up, cancel)
	stopClose := context.AfterFunc(g.ctx, cancel)
	return ctx, func() { stop(); stopClose(); cancel() }
}

// forwardSampling forwards a server's sampling/createMessage to a client.
func (g *Gateway) forwardSampling(ctx context.Context, server string, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	ss, gc, err := g.downstreamFor(server, "sampling", func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil })
	if err != nil {
		return nil, err
	}
	ctx, cancel := g.forwardContext(ctx, gc, g.opts.ForwardTimeout)
	defer cancel()
	p := *req.Params
	var done func()
	p.Meta, done = g.relayToken(req.Session, p.Meta)
	defer done()
	res, err := ss.CreateMessage(ctx, &p)
	if err != nil {
		return nil, passErr(err)
	}
	return res, nil
}

// forwardElicitation forwards a server's elicitation/create to a client.
func (g *Gateway) forwardElicitation(ctx context.Context, server string, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	ss, gc, err := g.downstreamFor(server, "elicitation", func(c *mcp.ClientCapabilities) bool { return c.Elicitation != nil })
	if err != nil {
		return nil, err
	}
	ctx, cancel := g.forwardContext(ctx, gc, g.opts.ForwardTimeout)
	defer cancel()
	p := *req.Params
	var done func()
	p.Meta, done = g.relayToken(req.Session, p.Meta)
	defer done()
	if p.RequestedSchema != nil { // see rawSchemaMiddleware
		ctx = context.WithValue(ctx, rawSchemaKey{}, p.RequestedSchema)
		p.RequestedSchema = nil
	}
	res, err := ss.Elicit(ctx, &p)
	if err != nil {
		return nil, passErr(err)
	}
	return res, nil
}

// upstreamLog forwards a server's log message to every client (each gets
// it if at or above the level it set). Namespaced, the logger is prefixed
// with the server's name.
func (g *Gateway) upstreamLog(_ context.Context, server string, p *mcp.LoggingMessageParams) {
	out := *p
	if !g.opts.PlainNames {
		out.Logger = server
		if p.Logger != "" {
			out.Logger += "/" + p.Logger
		}
	}
	g.mu.Lock()
	rel := map[*mcp.ServerSession]context.Context{}
	var logging []*gwCall // calls that linger for their log messages
	for _, gc := range g.inflight[server] {
		rel[gc.ss] = gc.rel // on the stream of a call to that server, when there is one
		if gc.logs {
			gc.forwarding++
			logging = append(logging, gc)
		}
	}
	g.mu.Unlock()
	for ss := range g.server.Sessions() {
		base := rel[ss]
		if base == nil {
			base = g.ctx
		}
		ctx, cancel := context.WithTimeout(base, notifyTimeout)
		_ = ss.Log(ctx, &out)
		cancel()
	}
	g.mu.Lock()
	for _, gc := range logging {
		gc.forwarding--
		gc.lastProgress = time.Now()
	}
	g.mu.Unlock()
}

// upstreamUpdated tells subscribed clients that a server's resource
// changed.
func (g *Gateway) upstreamUpdated(_ context.Context, server string, p *mcp.ResourceUpdatedNotificationParams) {
	ctx, cancel := context.WithTimeout(g.ctx, notifyTimeout)
	defer cancel()
	_ = g.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: g.uriPrefix(server) + p.URI})
}

// levelRank orders log levels, most verbose first.
var levelRank = map[mcp.LoggingLevel]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4,
	"critical": 5, "alert": 6, "emergency": 7}

// setLevelMiddleware sees a client's logging/setLevel (go-sdk answers it)
// and asks the servers for that level if it is more verbose than any
// before, before answering, so that the client's next call logs at it.
func (g *Gateway) setLevelMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "logging/setLevel" || err != nil {
			return res, err
		}
		p, ok := req.GetParams().(*mcp.SetLoggingLevelParams)
		if !ok {
			return res, err
		}
		g.mu.Lock()
		cur, known := levelRank[g.logLevel]
		if r, ok := levelRank[p.Level]; !ok || g.logLevel != "" && known && r >= cur {
			g.mu.Unlock()
			return res, err
		}
		g.logLevel = p.Level
		g.mu.Unlock()
		snap, _, _ := g.extras.snapshot()
		var wg sync.WaitGroup
		for _, s := range snap {
			if !s.Caps.Logging {
				continue
			}
			g.mu.Lock()
			g.levelSent[s.Server] = s.Attempt
			g.mu.Unlock()
			wg.Add(1)
			go func() { // waited for below; bounded by the list timeout
				defer wg.Done()
				g.sendLevel(ctx, s.Server, p.Level)
			}()
		}
		wg.Wait()
		return res, err
	}
}

// sendLevelLocked asks servers that became ready since for the clients'
// log level. g.mu is held.
func (g *Gateway) sendLevelLocked(snap []extrasServerView) {
	if g.logLevel == "" || g.closed {
		return
	}
	for _, s := range snap {
		if !s.Caps.Logging || g.levelSent[s.Server] == s.Attempt {
			continue
		}
		g.levelSent[s.Server] = s.Attempt
		level := g.logLevel
		g.wg.Add(1)
		go func() { // owned by g: Close waits; bounded by the list timeout and g.ctx
			defer g.wg.Done()
			g.sendLevel(g.ctx, s.Server, level)
		}()
	}
}

func (g *Gateway) sendLevel(ctx context.Context, server string, level mcp.LoggingLevel) {
	m := g.m.Load()
	if m == nil {
		return
	}
	if err := m.SetLoggingLevel(ctx, server, level); err != nil {
		g.log.Warn("gateway: setting a server's log level failed", "server", server, "level", level, "err", err)
	}
}
