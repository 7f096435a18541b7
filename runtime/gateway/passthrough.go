package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpledger/mcpledger/events"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Requests a client makes of the exposed resources and prompts, passed
// through to the server behind them: reads, prompts, completion and
// resource subscriptions.

// readResource reads a server's resource for a client; content URIs are
// shown as the client knows them.
func (g *Gateway) readResource(ctx context.Context, server, uri string) (*mcp.ReadResourceResult, error) {
	m := g.m.Load()
	res, err := m.ReadResource(ctx, server, uri)
	if err != nil {
		return nil, passErr(err)
	}
	if prefix := g.uriPrefix(server); prefix != "" && res != nil {
		out := *res
		out.Contents = make([]*mcp.ResourceContents, len(res.Contents))
		for i, c := range res.Contents {
			if c != nil && c.URI != "" {
				cc := *c
				cc.URI = prefix + c.URI
				c = &cc
			}
			out.Contents[i] = c
		}
		res = &out
	}
	return res, nil
}

func (g *Gateway) getPrompt(ctx context.Context, server, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	res, err := g.m.Load().GetPrompt(ctx, server, name, args)
	if err != nil {
		return nil, passErr(err)
	}
	return res, nil
}

// passErr keeps a server's JSON-RPC error (its code and message) and
// turns anything else into an internal error with mcpledger's message.
func passErr(err error) error {
	if je := (*jsonrpc.Error)(nil); errors.As(err, &je) && je.Code != codeTransportRejected {
		return &jsonrpc.Error{Code: je.Code, Message: je.Message, Data: je.Data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpledger: " + err.Error()}
}

// codeTransportRejected is go-sdk's code for an HTTP transport failure
// (go-sdk-notes.md §1): not the server's answer.
const codeTransportRejected = -32005

// resolveURI returns the server and the server's own URI behind an
// exposed URI: a listed resource, or (namespaced) anything under a
// server's prefix, or (plain) a URI only one ready server could serve.
func (g *Gateway) resolveURI(uri string) (server, own string, err error) {
	g.mu.Lock()
	it, ok := g.resources[uri]
	g.mu.Unlock()
	if ok {
		return it.server, it.name, nil
	}
	snap, _, _ := g.extras.snapshot()
	if !g.opts.PlainNames {
		rest, ok := strings.CutPrefix(uri, ResourceScheme+"://")
		host, own, ok2 := strings.Cut(rest, "/")
		if ok && ok2 {
			for _, s := range snap {
				if strings.EqualFold(uriHost(s.Server), host) {
					return s.Server, own, nil
				}
			}
		}
		return "", "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcpledger: %q is not a resource of a ready server (namespaced URIs look like %s://SERVER/URI)", uri, ResourceScheme)}
	}
	var cands []string
	for _, s := range snap {
		if s.Caps.Resources {
			cands = append(cands, s.Server)
		}
	}
	if len(cands) == 1 {
		return cands[0], uri, nil
	}
	return "", "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcpledger: no ready server lists resource %q", uri)}
}

// complete routes completion/complete to the server of the prompt or
// resource template referred to.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := *req.Params
	ref := *p.Ref
	var server string
	switch ref.Type {
	case "ref/prompt":
		g.mu.Lock()
		it, ok := g.prompts[ref.Name]
		g.mu.Unlock()
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcpledger: unknown prompt %q", ref.Name)}
		}
		server, ref.Name = it.server, it.name
	case "ref/resource":
		g.mu.Lock()
		it, ok := g.templates[ref.URI]
		g.mu.Unlock()
		if ok {
			server, ref.URI = it.server, it.name
		} else {
			s, own, err := g.resolveURI(ref.URI)
			if err != nil {
				return nil, err
			}
			server, ref.URI = s, own
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("mcpledger: unknown reference type %q", ref.Type)}
	}
	if !g.serverCaps(server).Completions {
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	p.Ref = &ref
	res, err := g.m.Load().Complete(ctx, server, &p)
	if err != nil {
		return nil, passErr(err)
	}
	return res, nil
}

// serverCaps returns a ready server's capabilities (zero if not ready).
func (g *Gateway) serverCaps(server string) events.Capabilities {
	snap, _, _ := g.extras.snapshot()
	for _, s := range snap {
		if s.Server == server {
			return s.Caps
		}
	}
	return events.Capabilities{}
}

// subscribe subscribes the server of a resource on a client's behalf:
// once per (server, URI), whatever the number of clients (go-sdk tracks
// which clients to notify).
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	server, own, err := g.resolveURI(req.Params.URI)
	if err != nil {
		return err
	}
	key := exposedItem{server: server, name: own}
	g.mu.Lock()
	n := g.subs[key]
	g.subs[key] = n + 1
	g.mu.Unlock()
	if n > 0 {
		return nil
	}
	if err := g.m.Load().SubscribeResource(ctx, server, own); err != nil {
		g.mu.Lock()
		if g.subs[key]--; g.subs[key] <= 0 {
			delete(g.subs, key)
		}
		g.mu.Unlock()
		return passErr(err)
	}
	return nil
}

// unsubscribe ends the server's subscription when its last client leaves.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	server, own, err := g.resolveURI(req.Params.URI)
	if err != nil {
		return err
	}
	key := exposedItem{server: server, name: own}
	g.mu.Lock()
	n, ok := g.subs[key]
	if ok {
		if n <= 1 {
			delete(g.subs, key)
		} else {
			g.subs[key] = n - 1
		}
	}
	g.mu.Unlock()
	if !ok || n > 1 {
		return nil
	}
	if err := g.m.Load().UnsubscribeResource(ctx, server, own); err != nil {
		return passErr(err)
	}
	return nil
}
