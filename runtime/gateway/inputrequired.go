package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Input-required results (MCP 2026-07-28, SEP-2322): a server that needs
// something of the client during a request (an elicitation, a sampling,
// its roots) answers with input requests and an opaque requestState, and
// the client retries the request with its answers (inputResponses) and
// that state. 2025-11-25 has server-to-client requests for the same.
//
// The gateway's clients of its servers hand such results to the gateway
// instead of answering them themselves (newClient disables go-sdk's
// multi-round-trip middleware), and the gateway carries each round
// through: a retry's inputResponses and requestState go to the server
// (roundMiddleware), with the capabilities the downstream client
// declared, not the gateway's. Then:
//   - a client of 2026-07-28 gets the input requests as an input_required
//     result, and its retry goes up;
//   - a client of an older version is asked by server-to-client requests
//     as before (fulfill), and the gateway retries, up to maxRounds.
//
// Approval under call policy ask (approve.go) is one more input request,
// of the gateway's own (approvalInput), for a 2026 client. The
// requestState a tool call's client sees is the gateway's (sealed): the
// server's state, the approval given, and the call it is bound to (tool
// name and arguments), with an HMAC so that a client cannot forge an
// approval or a state, and an expiry.

// maxRounds bounds the input rounds the gateway answers for a client
// without input_required results (as go-sdk's client does).
const maxRounds = 10

// approvalInput is the key of the gateway's approval input request
// (namespaced: a server's own keys pass through beside it).
const approvalInput = "io.mcpledger/approval"

// sealPrefix starts a requestState sealed by the gateway.
const sealPrefix = "mcpledger1."

// round is what one request of a client carries to a server: the answers
// to the server's input requests, its state, and the client's declared
// capabilities (nil: leave the gateway's) and log level.
type round struct {
	responses mcp.InputResponseMap
	state     string
	caps      *mcp.ClientCapabilities
	logLevel  any // the log level a 2026-07-28 request asked for in its _meta (nil: none)
}

type roundKey struct{}

func withRound(ctx context.Context, r *round) context.Context {
	return context.WithValue(ctx, roundKey{}, r)
}

// readRound and promptRound carry a client's resources/read or
// prompts/get round to the server: its answers and state (passed through
// as they are: the gateway adds nothing to these requests), and its
// declared capabilities. A client of an older version is asked by go-sdk
// (its server middleware answers one round by server-to-client requests).
func readRound(ctx context.Context, req *mcp.ReadResourceRequest) context.Context {
	p := req.Params
	return withRound(ctx, &round{responses: p.InputResponses, state: p.RequestState, caps: capsOf(req.Session), logLevel: p.Meta[metaLogLevel]})
}

func promptRound(ctx context.Context, req *mcp.GetPromptRequest) context.Context {
	p := req.Params
	return withRound(ctx, &round{responses: p.InputResponses, state: p.RequestState, caps: capsOf(req.Session), logLevel: p.Meta[metaLogLevel]})
}

// roundMiddleware puts a round's answers and state on the request sent to
// the server, and on a 2026-07-28 request the client's capabilities in
// place of the gateway's.
//
// A request that is no client's round (`mcpledger call` through a running
// serve) has nobody to ask: a server's input requests fail it, saying so.
func roundMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		rd, _ := ctx.Value(roundKey{}).(*round)
		r, ok := req.(*mcp.ClientRequest[mcp.Params])
		if !ok {
			return next(ctx, method, req)
		}
		if rd == nil {
			res, err := next(ctx, method, req)
			if in, ok := res.(interface{ NeedsInput() bool }); ok && err == nil && in.NeedsInput() {
				return nil, fmt.Errorf("%w: the server asked for input (elicitation, sampling or roots) during a request that no gateway client made, so there is nobody to ask: make it from a client of the gateway", errNoOneToAsk)
			}
			return res, err
		}
		var p mcp.Params
		switch cp := r.Params.(type) {
		case *mcp.CallToolParams:
			c := *cp
			c.InputResponses, c.RequestState, c.Meta = rd.responses, rd.state, rd.meta(cp.Meta)
			p = &c
		case *mcp.GetPromptParams:
			c := *cp
			c.InputResponses, c.RequestState, c.Meta = rd.responses, rd.state, rd.meta(cp.Meta)
			p = &c
		case *mcp.ReadResourceParams:
			c := *cp
			c.InputResponses, c.RequestState, c.Meta = rd.responses, rd.state, rd.meta(cp.Meta)
			p = &c
		default:
			return next(ctx, method, req)
		}
		return next(ctx, method, &mcp.ClientRequest[mcp.Params]{Session: r.Session, Params: p})
	}
}

// metaCapabilities is the _meta key of a 2026-07-28 request's client
// capabilities.
const metaCapabilities = "io.modelcontextprotocol/clientCapabilities"

// meta returns meta with, if it is a 2026-07-28 request's (go-sdk put the
// gateway's capabilities there), the client capabilities the gateway
// forwards (sampling, elicitation, roots) as the round's client declared
// them, and the log level it asked for.
func (rd *round) meta(meta mcp.Meta) mcp.Meta {
	if _, ok := meta[metaCapabilities]; !ok || rd.caps == nil && rd.logLevel == nil {
		return meta
	}
	out := maps.Clone(meta)
	if rd.logLevel != nil {
		out[metaLogLevel] = rd.logLevel
	}
	if caps := rd.caps; caps != nil {
		c := map[string]any{}
		if caps.Sampling != nil {
			c["sampling"] = caps.Sampling
		}
		if caps.Elicitation != nil {
			c["elicitation"] = caps.Elicitation
		}
		if caps.RootsV2 != nil {
			c["roots"] = caps.RootsV2
		} else if caps.Roots.ListChanged {
			c["roots"] = &caps.Roots
		}
		out[metaCapabilities] = c
	}
	return out
}

// metaLogLevel is the _meta key of a 2026-07-28 request's log level.
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// inputRequired reports whether c takes input_required results (it speaks
// 2026-07-28 or later).
func inputRequired(c client) bool {
	ip := c.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= protocolVersion2026
}

// fulfill answers a server's input requests by asking the client of the
// call gc, as the server would have asked it in 2025-11-25.
func (g *Gateway) fulfill(ctx context.Context, server string, gc *gwCall, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(reqs))
	for id, ir := range reqs {
		var res mcp.InputResponse
		var err error
		switch p := ir.(type) {
		case *mcp.ElicitParams:
			res, err = g.forwardElicitation(ctx, server, &mcp.ElicitRequest{Params: p})
		case *mcp.CreateMessageWithToolsParams: // go-sdk decodes every sampling input request so
			res, err = g.forwardSamplingWithTools(ctx, server, p)
		case *mcp.ListRootsParams:
			res, err = g.forwardRoots(ctx, gc, p)
		default:
			err = fmt.Errorf("mcpledger: server %q asked for input of an unknown kind (%T)", server, ir)
		}
		if err != nil {
			return nil, err
		}
		out[id] = res
	}
	return out, nil
}

// forwardSamplingWithTools forwards a sampling input request with tools.
func (g *Gateway) forwardSamplingWithTools(ctx context.Context, server string, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	ss, gc, err := g.downstreamFor(server, "sampling", func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil })
	if err != nil {
		return nil, err
	}
	ctx, cancel := g.forwardContext(ctx, gc, g.opts.ForwardTimeout)
	defer cancel()
	res, err := ss.CreateMessageWithTools(ctx, p)
	if err != nil {
		return nil, passErr(err)
	}
	return res, nil
}

// forwardRoots asks the client of the call gc for its roots.
func (g *Gateway) forwardRoots(ctx context.Context, gc *gwCall, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if c := capsOf(gc.peer); c.RootsV2 == nil && !c.Roots.ListChanged {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
			"mcpledger: server %q asked for the client's roots, but the client (%s) did not declare the roots capability; the request was refused", gc.server, g.caller(gc.peer))}
	}
	ctx, cancel := g.forwardContext(ctx, gc, g.opts.ForwardTimeout)
	defer cancel()
	res, err := gc.ss.ListRoots(ctx, p)
	if err != nil {
		return nil, passErr(err)
	}
	return res, nil
}

// sealed is what a sealed requestState holds.
type sealed struct {
	Name     string `json:"n"`           // the exposed tool
	Args     []byte `json:"h"`           // SHA-256 of its compacted arguments
	Asked    bool   `json:"k,omitempty"` // the gateway asked for approval
	Approved string `json:"a,omitempty"` // who approved the call ("" if nobody yet)
	Upstream string `json:"u,omitempty"` // the server's requestState
	Expires  int64  `json:"x"`           // unix seconds
}

// errNoOneToAsk fails a request not made by a gateway client whose
// server asked for input.
var errNoOneToAsk = errors.New("gateway: input required")

// errBadState is the answer to a requestState the gateway did not seal
// for this call, or sealed too long ago.
var errBadState = errors.New("gateway: requestState")

// argsDigest is the SHA-256 of args with insignificant space removed.
func argsDigest(args json.RawMessage) []byte {
	var b bytes.Buffer
	if len(args) == 0 || json.Compact(&b, args) != nil {
		b.Reset()
		b.Write(args)
	}
	sum := sha256.Sum256(b.Bytes())
	return sum[:]
}

// seal returns s as a requestState the gateway can verify.
func (g *Gateway) seal(s sealed) string {
	s.Expires = time.Now().Add(g.opts.ForwardTimeout).Unix()
	b, _ := json.Marshal(s)
	body := base64.RawURLEncoding.EncodeToString(b)
	mac := hmac.New(sha256.New, g.stateKey[:])
	mac.Write([]byte(body))
	return sealPrefix + body + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// unseal verifies a requestState sealed by seal for the call of name
// with args.
func (g *Gateway) unseal(state, name string, args json.RawMessage) (sealed, error) {
	rest, ok := strings.CutPrefix(state, sealPrefix)
	body, sig, ok2 := strings.Cut(rest, ".")
	var s sealed
	if !ok || !ok2 {
		return s, fmt.Errorf("%w was not issued by this gateway: retry the request without requestState and inputResponses", errBadState)
	}
	want := hmac.New(sha256.New, g.stateKey[:])
	want.Write([]byte(body))
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, want.Sum(nil)) {
		return s, fmt.Errorf("%w fails its integrity check (altered, or issued before the gateway restarted): retry the request without requestState and inputResponses", errBadState)
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(b, &s) != nil {
		return s, fmt.Errorf("%w is malformed: retry the request without requestState and inputResponses", errBadState)
	}
	if s.Name != name || !hmac.Equal(s.Args, argsDigest(args)) {
		return s, fmt.Errorf("%w belongs to another call (tool or arguments differ): retry with the arguments of the first request, or without requestState", errBadState)
	}
	if time.Now().Unix() > s.Expires {
		return s, fmt.Errorf("%w expired: retry the request without requestState and inputResponses", errBadState)
	}
	return s, nil
}

// needsInput returns the input requests of a server's result, or nil.
func needsInput(r *mcp.CallToolResult) mcp.InputRequestMap {
	if r == nil || r.InputRequests == nil && !r.NeedsInput() {
		return nil
	}
	if r.InputRequests == nil {
		return mcp.InputRequestMap{} // load shedding: retry later
	}
	return r.InputRequests
}

// resume takes up a 2026-07-28 client's retry: it verifies the sealed
// requestState and splits its answers between the gateway's approval and
// the server's input requests.
func (g *Gateway) resume(gc *gwCall, rd *round, name string, args json.RawMessage, in *round) error {
	var s sealed
	if in.state != "" {
		var err error
		if s, err = g.unseal(in.state, name, args); err != nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "mcpledger: " + err.Error()}
		}
	}
	gc.approvedBy, rd.state = s.Approved, s.Upstream
	for id, v := range in.responses {
		if id == approvalInput && s.Asked {
			gc.answer, _ = v.(*mcp.ElicitResult)
			continue
		}
		if rd.responses == nil {
			rd.responses = mcp.InputResponseMap{}
		}
		rd.responses[id] = v
	}
	return nil
}
