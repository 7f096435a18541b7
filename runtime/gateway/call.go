package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime"
)

// A tool call through the gateway: the client it is made for, its state
// while in flight (gwCall), and the path from a client's tools/call to
// the Manager and back, guarded.

// client is the client a call is made for, as the gateway needs to know
// it: its version, capabilities and name (InitializeParams) and its
// session's ID. A *mcp.ServerSession is one (a session, or a 2026-07-28
// request go-sdk serves with a session of its own); so is sessionless, a
// 2026-07-28 request the fast path answers (fastcall2026.go).
type client interface {
	InitializeParams() *mcp.InitializeParams
	ID() string
}

// sessionless is a 2026-07-28 client the fast path answers: what its
// request's _meta declares, and no session.
type sessionless struct{ ip *mcp.InitializeParams }

func (s sessionless) InitializeParams() *mcp.InitializeParams { return s.ip }
func (sessionless) ID() string                                { return "" }

// gwCall is a tool call in flight through the gateway.
type gwCall struct {
	// peer is the call's client; ss its go-sdk session, to which requests
	// and notifications are forwarded (nil for a sessionless one, which
	// takes none: its client speaks 2026-07-28).
	peer   client
	ss     *mcp.ServerSession
	server string
	token  any // the client's progress token, or nil
	// rel carries the values (not the cancellation) of the client's
	// request: messages sent to the client with it travel, over
	// Streamable HTTP, on that request's stream (go-sdk routes by them).
	rel context.Context

	// logs: a 2026-07-28 client asked for the call's log messages, which
	// only its request's stream carries (it lingers for them, see linger).
	logs bool

	// Guarded by Gateway.mu: the progress tokens sent upstream for it, and
	// its progress (and, with logs, log) forwarding (see linger).
	sent         []string
	forwarding   int
	lastProgress time.Time

	// Approval under policy ask (approve.go), on the calling goroutine:
	// who approved the call in an earlier round, the answer of a
	// 2026-07-28 client's user to the gateway's approval request, and the
	// request to send such a client when it must be asked.
	approvedBy string
	answer     *mcp.ElicitResult
	ask        *mcp.ElicitParams
}

type gwCallKey struct{}

// callOf returns the gateway call ctx belongs to, or nil.
func callOf(ctx context.Context) *gwCall {
	c, _ := ctx.Value(gwCallKey{}).(*gwCall)
	return c
}

// plainCall reports whether a tool call made with ctx needs nothing of
// the sending middleware of newClient's clients but callMeta (see Bind).
func plainCall(ctx context.Context) bool {
	if gc := callOf(ctx); gc != nil && gc.token != nil {
		return false
	}
	rd, _ := ctx.Value(roundKey{}).(*round)
	return rd != nil && len(rd.responses) == 0 && rd.state == ""
}

// callMeta is roundMiddleware's part in the _meta of a plain call on a
// 2026-07-28 session (runtime.Options.CallMeta).
func callMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if rd, _ := ctx.Value(roundKey{}).(*round); rd != nil {
		return rd.meta(meta)
	}
	return meta
}

// callTool is the handler of every exposed tool.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.Params
	return g.call(tracedRequest(ctx, req), req.Session, p.Name, p.Arguments, p.GetProgressToken(),
		&round{responses: p.InputResponses, state: p.RequestState, logLevel: p.Meta[metaLogLevel]})
}

// call makes a client's call of the exposed tool name with args (raw
// JSON; none if empty) for client cl, token its progress token (nil if
// it asked for none), in (nil: none) the inputResponses and requestState
// of a client's retry (inputrequired.go), and answers it guarded. Both
// call paths end here: go-sdk's (callTool) and the fast one (fastcall.go).
func (g *Gateway) call(ctx context.Context, cl client, name string, rawArgs json.RawMessage, token any, in *round) (*mcp.CallToolResult, error) {
	m := g.m.Load()
	g.mu.Lock()
	t, ok := g.tools[name]
	g.mu.Unlock()
	if !ok || m == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.ctx, cancel) // Close cancels calls in flight
	defer stop()
	rd := &round{caps: capsOf(cl)}
	if in != nil {
		rd.logLevel = in.logLevel
	}
	ss, _ := cl.(*mcp.ServerSession)
	gc := &gwCall{peer: cl, ss: ss, server: t.server, token: token, rel: context.WithoutCancel(ctx),
		logs: rd.logLevel != nil && inputRequired(cl)}
	if in != nil && (in.state != "" || len(in.responses) > 0) {
		if err := g.resume(gc, rd, name, rawArgs, in); err != nil {
			return nil, err
		}
	}
	g.track(gc, true)
	defer g.track(gc, false)
	ctx = context.WithValue(ctx, gwCallKey{}, gc)
	var args any
	if len(rawArgs) > 0 {
		args = rawArgs
	}
	direct := !inputRequired(cl) // asked by server-to-client requests
	for n := 1; ; n++ {
		r, err := m.CallToolWith(withRound(ctx, rd), t.catalog, args, &runtime.CallOptions{Caller: g.caller(cl), Wrap: g.opts.Wrap})
		g.linger(gc)
		if gc.ask != nil && errors.As(err, new(*runtime.DeniedError)) {
			// A 2026-07-28 client's user is asked for approval.
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approvalInput: gc.ask},
				RequestState: g.seal(sealed{Name: name, Args: argsDigest(rawArgs), Asked: true})}, nil
		}
		if r != nil && r.Result != nil {
			reqs := needsInput(r.Result)
			if reqs == nil {
				return g.guarded(r), nil // isError results (unknown tool, tool errors) too
			}
			if !direct {
				return &mcp.CallToolResult{InputRequests: reqs, RequestState: g.seal(sealed{Name: name, Args: argsDigest(rawArgs),
					Approved: gc.approvedBy, Upstream: r.Result.RequestState})}, nil
			}
			if len(reqs) == 0 || n >= maxRounds {
				err = fmt.Errorf("server %q asked for input %d times without completing the call (or is shedding load): retry later", t.server, n)
			} else if rd.responses, err = g.fulfill(ctx, t.server, gc, reqs); err == nil {
				rd.state = r.Result.RequestState
				continue
			}
		}
		if err == nil {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		}
		if ctx.Err() != nil && g.ctx.Err() == nil {
			return nil, err // the client cancelled: nobody reads the answer
		}
		if je := (*jsonrpc.Error)(nil); errors.As(err, &je) && je.Code == mcp.CodeMissingRequiredClientCapabilities {
			return nil, passErr(err) // the server needs a capability the client did not declare: the client's to know
		}
		// Everything else (denied, invalid arguments, unavailable, timed out,
		// outcome unknown) is a tool error the model can read.
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "mcpledger: " + err.Error()}}}, nil
	}
}

// track adds (or removes) a call in flight to its server.
func (g *Gateway) track(gc *gwCall, add bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls := g.inflight[gc.server]
	if add {
		g.inflight[gc.server] = append(calls, gc)
		return
	}
	for i, c := range calls {
		if c == gc {
			calls = append(calls[:i:i], calls[i+1:]...)
			break
		}
	}
	if len(calls) == 0 {
		delete(g.inflight, gc.server)
	} else {
		g.inflight[gc.server] = calls
	}
}
