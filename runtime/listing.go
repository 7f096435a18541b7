package runtime

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a connection lists: tools (re-listed on list_changed), resources
// and prompts, and the capabilities and tool definitions as the journal
// keeps them.

func (c *conn) requestRelist(trigger string) {
	select {
	case c.relist <- trigger:
	default: // one pending re-list covers this one too
	}
}

// relistLoop re-lists tools when the server says they changed, on demand
// (Refresh), and every RelistInterval if set.
func (c *conn) relistLoop() {
	var tick <-chan time.Time
	if iv := c.m.opts.RelistInterval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	for {
		trigger := "interval"
		select {
		case <-c.ctx.Done():
			return
		case trigger = <-c.relist:
		case <-tick:
		}
		switch trigger {
		case "resources_changed", "prompts_changed":
			if ir := c.session().InitializeResult(); ir != nil {
				c.listExtras(capabilities(ir.Capabilities))
			}
			continue
		}
		tools, excluded, err := c.listTools()
		if c.ctx.Err() != nil {
			return
		}
		if err != nil {
			c.m.log.Warn("re-listing tools failed", "server", c.server, "err", err)
			continue
		}
		c.m.observe(c, &events.ToolsListed{Attempt: c.attempt, Trigger: trigger, Tools: tools,
			ProtocolVersion: c.negotiated(), Excluded: excluded})
	}
}

// listTools lists every page of tools, with a deadline. It also returns
// the tools go-sdk's client left out of the listing, with its reasons
// (see exclusions).
func (c *conn) listTools() ([]events.Tool, []events.ExcludedTool, error) {
	cs := c.session()
	if cs == nil {
		return nil, nil, errNoSession
	}
	var out []events.Tool
	var excluded []events.ExcludedTool
	err := retry(c.ctx, c.m.opts.Retry, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, c.m.opts.ListTimeout)
		defer cancel()
		out = out[:0]
		c.excl.start()
		defer func() { excluded = c.excl.take() }()
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			out = append(out, toolOf(t))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, excluded, nil
}

// negotiated is the protocol version of the live session ("" without one).
func (c *conn) negotiated() string {
	if cs := c.session(); cs != nil {
		if ir := cs.InitializeResult(); ir != nil {
			return ir.ProtocolVersion
		}
	}
	return ""
}

// extrasWait is how long a new connection's first tool listing waits
// for its resources and prompts to be listed (see conn.go).
const extrasWait = 5 * time.Second

// listExtras lists resources, templates and prompts, best-effort: a
// failure is recorded on the event and changes nothing else.
func (c *conn) listExtras(caps events.Capabilities) {
	cs := c.session()
	if cs == nil {
		return
	}
	if caps.Resources {
		ctx, cancel := context.WithTimeout(c.ctx, c.m.opts.ListTimeout)
		ev := &events.ResourcesListed{Attempt: c.attempt}
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				ev.Error = err.Error()
				break
			}
			ev.Resources = append(ev.Resources, events.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				if ev.Error == "" {
					ev.Error = err.Error()
				}
				break
			}
			ev.Templates = append(ev.Templates, events.ResourceTemplate{URITemplate: r.URITemplate, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
		}
		cancel()
		if c.ctx.Err() == nil {
			c.m.observe(c, ev)
		}
	}
	if caps.Prompts {
		ctx, cancel := context.WithTimeout(c.ctx, c.m.opts.ListTimeout)
		ev := &events.PromptsListed{Attempt: c.attempt}
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				ev.Error = err.Error()
				break
			}
			pr := events.Prompt{Name: p.Name, Description: p.Description}
			for _, a := range p.Arguments {
				pr.Arguments = append(pr.Arguments, events.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required})
			}
			ev.Prompts = append(ev.Prompts, pr)
		}
		cancel()
		if c.ctx.Err() == nil {
			c.m.observe(c, ev)
		}
	}
}

func capabilities(sc *mcp.ServerCapabilities) events.Capabilities {
	var c events.Capabilities
	if sc == nil {
		return c
	}
	if sc.Tools != nil {
		c.Tools, c.ToolsListChanged = true, sc.Tools.ListChanged
	}
	if sc.Resources != nil {
		c.Resources, c.ResourcesSubscribe, c.ResourcesListChange = true, sc.Resources.Subscribe, sc.Resources.ListChanged
	}
	if sc.Prompts != nil {
		c.Prompts, c.PromptsListChanged = true, sc.Prompts.ListChanged
	}
	c.Logging = sc.Logging != nil
	c.Completions = sc.Completions != nil
	return c
}

// toolOf converts a listed tool to its journal form, with canonical JSON
// schemas and the definition hash approvals pin.
func toolOf(t *mcp.Tool) events.Tool {
	in := canonicalJSON(t.InputSchema)
	et := events.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in,
		OutputSchema: canonicalJSON(t.OutputSchema), DefHash: events.ToolDefHash(t.Name, t.Description, in)}
	if a := t.Annotations; a != nil {
		et.Annotations = events.ToolAnnotations{ReadOnly: boolPtr(a.ReadOnlyHint), Destructive: a.DestructiveHint,
			Idempotent: boolPtr(a.IdempotentHint), OpenWorld: a.OpenWorldHint}
	}
	return et
}

func boolPtr(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}

// canonicalJSON re-encodes v with sorted object keys (encoding/json sorts
// map keys), so the same schema always gives the same text.
func canonicalJSON(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var x any
	if json.Unmarshal(b, &x) != nil {
		return string(b)
	}
	b, _ = json.Marshal(x)
	return string(b)
}
