package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/projections"
	rt "github.com/mcpledger/mcpledger/runtime"
	"github.com/mcpledger/mcpledger/runtime/control"
	"github.com/mcpledger/mcpledger/runtime/guard"
	"github.com/mcpledger/mcpledger/runtime/oauth"
)

// CallCommand calls one tool: through the running mcpledger if there is
// one, otherwise in a one-shot session that starts the servers, calls,
// and stops them (all journaled).
type CallCommand struct{ env *env }

// Run parses args and calls the tool.
func (c *CallCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("call", "TOOL [--args JSON | --args @FILE | --args -] [--json] [--wrap]")
	var cf configFlags
	cf.register(f)
	argsFlag := f.String("args", "{}", "tool arguments as a JSON object: inline, `@FILE` to read them from a file, or - from standard input (for large ones)")
	asJSON := f.Bool("json", false, "print the MCP CallToolResult as JSON")
	wrap := f.Bool("wrap", false, `wrap the output in <mcp_tool_output server=… tool=… trust="untrusted"> markers`)
	traceparent := f.String("traceparent", "", "make the call in the W3C trace context `TRACEPARENT` (00-TRACEID-SPANID-FLAGS): its span joins that trace, and the server is told (default: $TRACEPARENT, with $TRACESTATE)")
	if err := f.Parse(args); err != nil {
		return err
	}
	tp, ts, err := c.traceContext(*traceparent)
	if err != nil {
		return err
	}
	ctx, _ = rt.WithTraceContext(ctx, tp, ts)
	tool, err := f.oneArg("")
	if err != nil {
		return err
	}
	if tool == "" {
		f.Usage()
		return usageErrorf("call: name the tool (mcpledger tools lists them)")
	}
	argsJSON, a, err := readCallArgs(*argsFlag, c.env.stdin)
	if err != nil {
		return err
	}
	// Running the command is the user's own approval of the call (under a
	// policy of ask); the journal records it as call.decided by
	// "user:mcpledger call".
	var out *rt.CallResult
	defer c.env.progress("waiting for "+tool+" (Ctrl-C cancels the call)", progressAfter).end()
	if cl := f.control(); cl != nil {
		var raw json.RawMessage
		req := control.Request{Op: "call", Name: tool, Args: argsJSON, By: "cli", Rendered: true, Wrap: *wrap, TraceParent: tp, TraceState: ts}
		if err := cl.Do(ctx, req, &raw); err != nil {
			return err
		}
		var legacy bool
		if out, legacy, err = decodeCallReply(raw); err != nil {
			return err
		}
		if legacy && *wrap {
			// A process that predates CallReply: render here, as it did.
			var entries []projections.Entry
			server, name := "", tool
			if cl.Do(ctx, control.Request{Op: "tools"}, &entries) == nil {
				for _, e := range entries {
					if e.Name == tool {
						server, name = e.Server, e.Tool
					}
				}
			}
			out.Text = guard.WrapOutput(server, name, out.Text)
		}
	} else {
		opts, err := cf.options(c.env, "call")
		if err != nil {
			return err
		}
		j, _, err := f.openWritable()
		if err != nil {
			return err
		}
		defer j.Close()
		m, err := rt.New(storeJournal{j.Journal}, opts)
		if err != nil {
			return err
		}
		if _, err := m.Start(ctx); err != nil {
			m.Close()
			return err
		}
		printConfigReport(c.env.stderr, m.Snapshot().Config, projections.ConfigView{})
		call := func() (*rt.CallResult, error) {
			return m.CallToolWith(ctx, tool, a, &rt.CallOptions{Caller: "cli", UserApproved: "mcpledger call", Wrap: *wrap})
		}
		out, err = call()
		var se *oauth.ScopeError
		if errors.As(err, &se) && c.env.interactive() {
			// The server wants more scope than the stored sign-in holds:
			// sign in again for both (step-up), then call once more.
			if serr := c.env.stepUp(ctx, m, &cf, se); serr != nil {
				err = fmt.Errorf("%w\n(signing in again for the missing scopes failed: %v)", err, serr)
			} else {
				out, err = call()
			}
		}
		if cerr := m.Shutdown("call"); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	res := out.Result
	if len(out.Signals) > 0 {
		fmt.Fprintf(c.env.stderr, "mcpledger: possible prompt injection in the output (advisory, nothing was changed): %s\n", strings.Join(out.Signals, ", "))
	}
	if *asJSON {
		if err := json.NewEncoder(c.env.stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.env.stdout, out.Text)
	}
	if res.IsError {
		return errors.New("the tool reported an error")
	}
	return nil
}

// traceContext is the trace context to make the call in: flag's (a
// usage error if malformed), else TRACEPARENT's and TRACESTATE's (one
// warning if malformed: the call is made in no trace), else none.
func (c *CallCommand) traceContext(flag string) (traceparent, tracestate string, err error) {
	if flag != "" {
		if _, ok := rt.WithTraceContext(context.Background(), flag, ""); !ok {
			return "", "", usageErrorf("call: --traceparent is not a W3C traceparent: give 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lower case, IDs not all zero")
		}
		return flag, "", nil
	}
	tp, ts := c.env.getenv("TRACEPARENT"), c.env.getenv("TRACESTATE")
	if tp == "" {
		return "", "", nil
	}
	if _, ok := rt.WithTraceContext(context.Background(), tp, ts); !ok {
		fmt.Fprintln(c.env.stderr, "mcpledger: TRACEPARENT is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>): the call is made in no trace")
		return "", "", nil
	}
	return tp, ts, nil
}

// decodeCallReply decodes the running process's answer to a call: a
// control.CallReply, rendered there with the server's maxResultChars; or,
// from a process that predates it, the bare CallToolResult, rendered here
// at the default bound and not wrapped (legacy).
func decodeCallReply(raw json.RawMessage) (out *rt.CallResult, legacy bool, err error) {
	var reply control.CallReply
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, false, undecodableReply(err)
	}
	res := &mcp.CallToolResult{}
	if len(reply.Result) > 0 {
		if err := json.Unmarshal(reply.Result, res); err != nil {
			return nil, false, undecodableReply(err)
		}
		return &rt.CallResult{Result: res, Signals: reply.Signals,
			Rendered: guard.Rendered{Text: reply.Text, Chars: reply.Chars, Cut: reply.Cut, Bytes: reply.Bytes}}, false, nil
	}
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, false, undecodableReply(err)
	}
	out = &rt.CallResult{Result: res, Rendered: guard.RenderResult(res, guard.DefaultMaxResultChars)}
	out.Signals = guard.DetectInjection(out.Text)
	return out, true, nil
}

// undecodableReply is the error of a running mcpledger's answer to a call
// that does not decode.
func undecodableReply(err error) error {
	return fmt.Errorf("call: the running mcpledger's answer does not decode (%w): see mcpledger status, and restart it if it runs another version", err)
}

// printResult writes res rendered as an agent would get it: text blocks
// verbatim, other blocks as JSON, bounded at the default MaxResultChars.
func printResult(e *env, res *mcp.CallToolResult) {
	fmt.Fprintln(e.stdout, guard.RenderResult(res, guard.DefaultMaxResultChars).Text)
}
