package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime"
)

// How the gateway names what it exposes. Namespaced (the default):
//
//	tool      mcp__<server>__<tool>   (the catalog name, projections.ToolName)
//	prompt    mcp__<server>__<prompt> (same scheme, disambiguated the same way)
//	resource  mcpledger://<host>/<the server's URI>
//	template  mcpledger://<host>/<the server's URI template>
//
// where <host> is the server's name when it is already lowercase
// [a-z0-9_-], else that sanitized form plus "-" and 8 hex digits of the
// name's SHA-256 (URI hosts are case-insensitive). With PlainNames every
// name and URI is the server's own.

// ResourceScheme is the URI scheme of namespaced resources.
const ResourceScheme = "mcpledger"

// exposedTool is a tool the gateway serves.
type exposedTool struct {
	server  string
	catalog string // the runtime.Manager's catalog name
	fp      string // definition fingerprint: re-added when it changes
	// paramHeaders: the input schema may declare x-mcp-header parameters,
	// whose Mcp-Param-* headers go-sdk checks on a 2026-07-28 call (the
	// fast path leaves those calls to it).
	paramHeaders bool
}

// exposedItem is a resource, template or prompt the gateway serves, by
// its server and the server's own URI, template or name.
type exposedItem struct {
	server string
	name   string
	fp     string
}

// uriHost returns the host part of server's namespaced URIs: its name in
// lower case with every other byte outside [a-z0-9_-] as '_', and a hash
// of the name when that changed it (so two names never share a host).
func uriHost(server string) string {
	b := []byte(server)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'):
			b[i] = '_'
		}
	}
	h := string(b)
	if h == server && h != "" {
		return h
	}
	sum := sha256.Sum256([]byte(server))
	return h + "-" + hex.EncodeToString(sum[:4])
}

// uriPrefix returns what the gateway puts before server's URIs.
func (g *Gateway) uriPrefix(server string) string {
	if g.opts.PlainNames {
		return ""
	}
	return ResourceScheme + "://" + uriHost(server) + "/"
}

// toolName returns the name e is exposed under.
func (g *Gateway) toolName(e *projections.Entry) string {
	if g.opts.PlainNames {
		return e.Tool
	}
	return e.Name
}

// toolFingerprint changes whenever anything the gateway shows of e does.
func toolFingerprint(e *projections.Entry) string {
	a := e.Annotations
	return strings.Join([]string{e.Title, e.Description, e.InputSchema, e.OutputSchema,
		fmt.Sprint(ptrBool(a.ReadOnly), ptrBool(a.Destructive), ptrBool(a.Idempotent), ptrBool(a.OpenWorld))}, "\x00")
}

func ptrBool(b *bool) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprint(*b)
}

// toolOfEntry builds the MCP tool of a catalog entry: the server's own
// schemas. ok is false when the input schema is not a JSON object schema
// (MCP requires one; go-sdk refuses the tool).
func toolOfEntry(name string, e *projections.Entry) (t *mcp.Tool, ok bool) {
	in := e.InputSchema
	if in == "" || in == "null" {
		in = `{"type":"object"}`
	}
	var obj map[string]any
	if json.Unmarshal([]byte(in), &obj) != nil || obj["type"] != "object" {
		return nil, false
	}
	t = &mcp.Tool{Name: name, Title: e.Title, Description: e.Description, InputSchema: json.RawMessage(in)}
	if out := e.OutputSchema; out != "" && out != "null" && json.Valid([]byte(out)) {
		t.OutputSchema = json.RawMessage(out)
	}
	a := e.Annotations
	if a.ReadOnly != nil || a.Destructive != nil || a.Idempotent != nil || a.OpenWorld != nil {
		t.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: a.ReadOnly != nil && *a.ReadOnly, DestructiveHint: a.Destructive,
			IdempotentHint: a.Idempotent != nil && *a.Idempotent, OpenWorldHint: a.OpenWorld}
	}
	return t, true
}

// Collisions returns, with PlainNames, an error naming every exposed name
// two servers share in the Manager's current catalog (nil without
// PlainNames or before Attach). Attach checks it once; a front end that
// attaches before the startup gate (serve over HTTP) checks again once
// Start returns, so that servers ready only then are compared too.
func (g *Gateway) Collisions() error {
	m := g.m.Load()
	if !g.opts.PlainNames || m == nil {
		return nil
	}
	return g.collisions(m.Snapshot())
}

// collisions returns an error naming every exposed name two servers
// share (PlainNames), or nil.
func (g *Gateway) collisions(v *runtime.View) error {
	var out []string
	seen := map[string]string{}
	for i := range v.Catalog.Tools {
		e := &v.Catalog.Tools[i]
		name := g.toolName(e)
		if s, ok := seen[name]; ok && s != e.Server {
			out = append(out, fmt.Sprintf("tool %q is offered by servers %q and %q", name, s, e.Server))
			continue
		}
		seen[name] = e.Server
	}
	snap, _, _ := g.extras.snapshot()
	kinds := map[string]map[string]string{"prompt": {}, "resource": {}, "resource template": {}}
	note := func(kind, name, server string) {
		if s, ok := kinds[kind][name]; ok && s != server {
			out = append(out, fmt.Sprintf("%s %q is offered by servers %q and %q", kind, name, s, server))
			return
		}
		kinds[kind][name] = server
	}
	for _, s := range snap {
		for _, p := range s.Prompts {
			note("prompt", p.Name, s.Server)
		}
		for _, r := range s.Resources {
			note("resource", r.URI, s.Server)
		}
		for _, t := range s.Templates {
			note("resource template", t.URITemplate, s.Server)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return fmt.Errorf("runtime: gateway: --plain-names: names collide: %s; serve with namespaced names (without --plain-names), or leave one of the servers out (--allowed-servers)",
		strings.Join(out, "; "))
}

// hide logs, once per name, that a newcomer's name is taken.
func (g *Gateway) hide(kind, name, owner, other string) {
	key := kind + "\x00" + name + "\x00" + other
	if g.hidden[key] {
		return
	}
	g.hidden[key] = true
	g.log.Warn("gateway: name collision with --plain-names; the newcomer is hidden", "kind", kind, "name", name,
		"served_by", owner, "hidden", other)
}

// owner picks which of the servers offering name serves it: the one that
// already does, else the first (servers come sorted); the others are
// hidden, logged once.
func (g *Gateway) owner(kind, name string, servers []string, current string, had bool) string {
	own := servers[0]
	if had && slices.Contains(servers, current) {
		own = current
	}
	for _, s := range servers {
		if s != own {
			g.hide(kind, name, own, s)
		}
	}
	return own
}

// syncTools brings the exposed tools in line with view v: removed tools
// are removed, new or changed ones (re)added; go-sdk then notifies
// clients (notifications/tools/list_changed, debounced 10 ms).
func (g *Gateway) syncTools(v *runtime.View) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	// Views come after every commit, calls included: most change no tool.
	if g.lastTools != nil && sameTools(g.lastTools, v.Catalog.Tools) {
		return
	}
	g.lastTools = v.Catalog.Tools
	byName := make(map[string][]*projections.Entry, len(v.Catalog.Tools))
	var names []string
	for i := range v.Catalog.Tools {
		e := &v.Catalog.Tools[i]
		name := g.toolName(e)
		if _, ok := byName[name]; !ok {
			names = append(names, name)
		}
		byName[name] = append(byName[name], e)
	}
	want := make(map[string]exposedTool, len(names))
	var add []*mcp.Tool
	for _, name := range names {
		es := byName[name]
		e := es[0]
		if len(es) > 1 { // only with PlainNames: catalog names are unique
			servers := make([]string, len(es))
			for i, x := range es {
				servers[i] = x.Server
			}
			cur, had := g.tools[name]
			own := g.owner("tool", name, servers, cur.server, had)
			e = es[slices.Index(servers, own)]
		}
		t := exposedTool{server: e.Server, catalog: e.Name, fp: toolFingerprint(e), paramHeaders: mayDeclareParamHeaders(e.InputSchema)}
		if cur, ok := g.tools[name]; ok && cur == t {
			want[name] = t
			continue
		}
		mt, ok := toolOfEntry(name, e)
		if !ok {
			g.hide("tool (input schema is not an object schema)", name, "", e.Server)
			continue
		}
		want[name] = t
		add = append(add, mt)
	}
	var remove []string
	for name := range g.tools {
		if _, ok := want[name]; !ok {
			remove = append(remove, name)
		}
	}
	g.tools = want
	if len(remove) > 0 {
		g.server.RemoveTools(remove...)
	}
	for _, t := range add {
		g.server.AddTool(t, g.callTool)
	}
}

// sameTools reports whether two catalogs show the same tools the same way
// (what toolFingerprint covers); it allocates nothing.
func sameTools(a, b []projections.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Name != y.Name || x.Server != y.Server || x.Tool != y.Tool || x.Title != y.Title || x.Description != y.Description ||
			x.InputSchema != y.InputSchema || x.OutputSchema != y.OutputSchema || !sameBool(x.Annotations.ReadOnly, y.Annotations.ReadOnly) ||
			!sameBool(x.Annotations.Destructive, y.Annotations.Destructive) || !sameBool(x.Annotations.Idempotent, y.Annotations.Idempotent) ||
			!sameBool(x.Annotations.OpenWorld, y.Annotations.OpenWorld) {
			return false
		}
	}
	return true
}

func sameBool(a, b *bool) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// offer is one resource, template or prompt a ready server lists, under
// the name the gateway would expose it by.
type offer struct {
	name string
	item exposedItem
	add  func(name string, it exposedItem) // registers it with go-sdk
}

// pick returns, per exposed name, the offer that serves it (see owner).
func (g *Gateway) pick(kind string, offers []offer, have map[string]exposedItem) (map[string]exposedItem, []offer) {
	byName := map[string][]offer{}
	var names []string
	for _, o := range offers {
		if _, ok := byName[o.name]; !ok {
			names = append(names, o.name)
		}
		byName[o.name] = append(byName[o.name], o)
	}
	want := make(map[string]exposedItem, len(names))
	var fresh []offer
	for _, name := range names {
		os := byName[name]
		o := os[0]
		if len(os) > 1 {
			servers := make([]string, len(os))
			for i, x := range os {
				servers[i] = x.item.server
			}
			cur, had := have[name]
			o = os[slices.Index(servers, g.owner(kind, name, servers, cur.server, had))]
		}
		want[name] = o.item
		if cur, ok := have[name]; !ok || cur != o.item {
			fresh = append(fresh, o)
		}
	}
	return want, fresh
}

// syncExtras brings the exposed resources, templates and prompts in line
// with the extras catalog, and sends the clients' log level to servers
// that became ready.
func (g *Gateway) syncExtras() {
	snap, _, _ := g.extras.snapshot()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	var promptNames map[projections.ToolRef]string
	if !g.opts.PlainNames {
		var refs []projections.ToolRef
		for _, s := range snap {
			for _, p := range s.Prompts {
				refs = append(refs, projections.ToolRef{Server: s.Server, Tool: p.Name})
			}
		}
		promptNames = projections.ToolNames(refs)
	}
	var res, tpl, pro []offer
	for _, s := range snap {
		prefix := g.uriPrefix(s.Server)
		for _, r := range s.Resources {
			name := prefix + r.URI
			if u, err := url.Parse(name); err != nil || u.Scheme == "" {
				g.hide("resource (not an absolute URI)", name, "", s.Server)
				continue
			}
			res = append(res, offer{name: name, item: exposedItem{server: s.Server, name: r.URI, fp: r.Name + "\x00" + r.Description + "\x00" + r.MIMEType},
				add: func(name string, it exposedItem) {
					g.server.AddResource(&mcp.Resource{URI: name, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType},
						func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
							return g.readResource(readRound(ctx, req), it.server, it.name)
						})
				}})
		}
		for _, t := range s.Templates {
			tpl = append(tpl, offer{name: prefix + t.URITemplate, item: exposedItem{server: s.Server, name: t.URITemplate, fp: t.Name + "\x00" + t.Description + "\x00" + t.MIMEType},
				add: func(name string, it exposedItem) {
					err := addTemplate(g.server, &mcp.ResourceTemplate{URITemplate: name, Name: t.Name, Description: t.Description, MIMEType: t.MIMEType},
						func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
							return g.readResource(readRound(ctx, req), it.server, strings.TrimPrefix(req.Params.URI, prefix))
						})
					if err != nil {
						delete(g.templates, name)
						g.hide("resource template ("+err.Error()+")", name, "", it.server)
					}
				}})
		}
		for _, p := range s.Prompts {
			name := p.Name
			if !g.opts.PlainNames {
				name = promptNames[projections.ToolRef{Server: s.Server, Tool: p.Name}]
			}
			b, _ := json.Marshal(p.Arguments)
			pro = append(pro, offer{name: name, item: exposedItem{server: s.Server, name: p.Name, fp: p.Description + "\x00" + string(b)},
				add: func(name string, it exposedItem) {
					mp := &mcp.Prompt{Name: name, Description: p.Description}
					for _, a := range p.Arguments {
						mp.Arguments = append(mp.Arguments, &mcp.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
					}
					g.server.AddPrompt(mp, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
						return g.getPrompt(promptRound(ctx, req), it.server, it.name, req.Params.Arguments)
					})
				}})
		}
	}
	wantRes, freshRes := g.pick("resource", res, g.resources)
	wantTpl, freshTpl := g.pick("resource template", tpl, g.templates)
	wantPro, freshPro := g.pick("prompt", pro, g.prompts)
	if gone := missing(g.resources, wantRes); len(gone) > 0 {
		g.server.RemoveResources(gone...)
	}
	if gone := missing(g.templates, wantTpl); len(gone) > 0 {
		g.server.RemoveResourceTemplates(gone...)
	}
	if gone := missing(g.prompts, wantPro); len(gone) > 0 {
		g.server.RemovePrompts(gone...)
	}
	g.resources, g.templates, g.prompts = wantRes, wantTpl, wantPro
	for _, fresh := range [][]offer{freshRes, freshTpl, freshPro} {
		for _, o := range fresh {
			o.add(o.name, o.item)
		}
	}
	g.sendLevelLocked(snap)
}

func missing(have, want map[string]exposedItem) []string {
	var out []string
	for k := range have {
		if _, ok := want[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// addTemplate adds t, turning go-sdk's panic on an invalid URI template
// into an error.
func addTemplate(s *mcp.Server, t *mcp.ResourceTemplate, h mcp.ResourceHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid URI template: %v", r)
		}
	}()
	s.AddResourceTemplate(t, h)
	return nil
}

// startingMiddleware holds a tools/call of a name not exposed yet while a
// server that may offer it is still starting (over HTTP clients are served
// from the moment the session is open, and a server's tools are exposed
// once it is ready): the call goes on when the name is exposed or the
// server has settled (go-sdk then answers an unknown name), and if the
// client gives up first, it gets a tool error naming the server and its
// state instead of "unknown tool".
func (g *Gateway) startingMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && r.Params != nil {
			if res := g.notExposed(ctx, r.Params.Name); res != nil {
				return res, nil
			}
		}
		return next(ctx, method, req)
	}
}

// notExposed waits, as startingMiddleware does, for name to be exposed; it
// returns the tool error to answer if the call cannot go on, nil if it
// can.
func (g *Gateway) notExposed(ctx context.Context, name string) *mcp.CallToolResult {
	if msg := g.awaitExposed(ctx, name); msg != "" {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	}
	return nil
}

// awaitExposed waits until name is exposed or no server that may offer it
// is starting; it returns why the call cannot go on if ctx or the gateway
// ends first ("" otherwise).
func (g *Gateway) awaitExposed(ctx context.Context, name string) string {
	var tick *time.Ticker
	for {
		g.mu.Lock()
		_, exposed := g.tools[name]
		g.mu.Unlock()
		s, starting := g.startingServer(name)
		if exposed || !starting {
			return ""
		}
		if tick == nil {
			tick = time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Sprintf("mcpledger: server %q is still %s: its tools are exposed once it is ready (notifications/tools/list_changed)", s.Name, s.State)
		case <-g.ctx.Done():
			return ""
		}
	}
}

// startingServer returns a server still starting (configuring, launching
// or handshaking) that may offer name: the one a namespaced name names,
// or with PlainNames any.
func (g *Gateway) startingServer(name string) (projections.ServerStatus, bool) {
	m := g.m.Load()
	if m == nil {
		return projections.ServerStatus{}, false
	}
	for _, s := range m.Status() {
		if !g.opts.PlainNames && !strings.HasPrefix(name, projections.ToolName(s.Name, "")) {
			continue
		}
		switch s.State {
		case events.StateConfiguring, events.StateLaunching, events.StateHandshaking:
			return s, true
		}
	}
	return projections.ServerStatus{}, false
}

// mayDeclareParamHeaders reports whether schema (JSON) may declare an
// x-mcp-header parameter: it names one, or holds a \u escape that could
// spell one.
func mayDeclareParamHeaders(schema string) bool {
	return strings.Contains(schema, "x-mcp-header") || strings.Contains(schema, `\u`)
}
