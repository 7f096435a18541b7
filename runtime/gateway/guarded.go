package gateway

import (
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime"
)

// MetaSignals is the _meta key under which a call's result carries the
// injection signals found in it (runtime.CallResult.Signals, the names
// `mcpledger call` prints; advisory: nothing else is changed), when there
// are any.
const MetaSignals = "io.mcpledger/signals"

// guarded is the answer to a client's call, guarded as `mcpledger call`
// guards its output: the result bounded in its own shape (or, under
// Options.Wrap, the rendered text between untrusted-content markers), with
// the injection signals under MetaSignals. It is never redacted: redaction
// is for the journal, not for the agent.
func (g *Gateway) guarded(r *runtime.CallResult) *mcp.CallToolResult {
	res := r.Bounded
	if res == nil {
		res = r.Result
	}
	if !g.opts.Wrap && len(r.Signals) == 0 {
		return res
	}
	out := *res
	if g.opts.Wrap {
		out.Content = []mcp.Content{&mcp.TextContent{Text: r.Text}}
	}
	if len(r.Signals) > 0 {
		out.Meta = maps.Clone(out.Meta)
		if out.Meta == nil {
			out.Meta = mcp.Meta{}
		}
		out.Meta[MetaSignals] = r.Signals
	}
	return &out
}
