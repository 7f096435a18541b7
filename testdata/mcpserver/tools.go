package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func errorResult(s string) *mcp.CallToolResult {
	r := text(s)
	r.IsError = true
	return r
}

type echoIn struct {
	Message string `json:"message"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type msIn struct {
	MS int `json:"ms"`
}

type bytesIn struct {
	Bytes int `json:"bytes"`
}

type nameIn struct {
	Name string `json:"name"`
}

type codeIn struct {
	Code int `json:"code"`
}

type noIn struct{}

func addTools(st *state, srv *mcp.Server) {
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Returns message as text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return text(in.Message), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "add", Description: "Adds a and b."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Sleeps ms milliseconds, or until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in msIn) (*mcp.CallToolResult, any, error) {
			start := time.Now()
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text(fmt.Sprintf("slept %d ms", in.MS)), nil, nil
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("slow: cancelled after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
			}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Returns a text block of the given size in bytes."},
		func(_ context.Context, _ *mcp.CallToolRequest, in bytesIn) (*mcp.CallToolResult, any, error) {
			if in.Bytes < 0 {
				return errorResult("big: bytes must not be negative"), nil, nil
			}
			return text(strings.Repeat("x", in.Bytes)), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "Always returns an isError result."},
		func(context.Context, *mcp.CallToolRequest, noIn) (*mcp.CallToolResult, any, error) {
			return errorResult("failed as asked"), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "env", Description: "Returns the value of an environment variable."},
		func(_ context.Context, _ *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, any, error) {
			v, ok := os.LookupEnv(in.Name)
			if !ok {
				return errorResult(fmt.Sprintf("env: %s is not set", in.Name)), nil, nil
			}
			return text(v), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "exit", Description: "Exits the server process at once with the given code."},
		func(_ context.Context, _ *mcp.CallToolRequest, in codeIn) (*mcp.CallToolResult, any, error) {
			logf("exiting with code %d as asked", in.Code)
			os.Exit(in.Code)
			return nil, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "counter", Description: "How many tool calls this process has received, this one included."},
		func(context.Context, *mcp.CallToolRequest, noIn) (*mcp.CallToolResult, any, error) {
			return text(strconv.FormatInt(st.calls.Load(), 10)), nil, nil
		})

	width := max(4, len(strconv.Itoa(st.cfg.toolCount-1)))
	for i := range st.cfg.toolCount {
		name := fmt.Sprintf("t%0*d", width, i)
		srv.AddTool(&mcp.Tool{Name: name, Description: "Generated tool " + name + ".", InputSchema: objectSchema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(name), nil })
	}
}

// objectSchema is the input schema of tools that take no arguments.
var objectSchema = json.RawMessage(`{"type":"object"}`)

func addNamedTool(srv *mcp.Server, name string) {
	srv.AddTool(&mcp.Tool{Name: name, Description: "Dynamic tool " + name + ".", InputSchema: objectSchema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(name), nil })
}

// changeTools adds dyn_<k> and removes dyn_<k-1> every interval.
func changeTools(srv *mcp.Server, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for k := 0; ; k++ {
		<-t.C
		addNamedTool(srv, fmt.Sprintf("dyn_%d", k))
		if k > 0 {
			srv.RemoveTools(fmt.Sprintf("dyn_%d", k-1))
		}
	}
}

// storm toggles the tool "storm" st.cfg.storm times. Over a tapped stdio
// connection each toggle is followed by a raw list_changed notification;
// otherwise the toggles are spaced beyond go-sdk's 10 ms debounce.
func storm(st *state, srv *mcp.Server) {
	for i := 1; i <= st.cfg.storm; i++ {
		if i%2 == 1 {
			addNamedTool(srv, "storm")
		} else {
			srv.RemoveTools("storm")
		}
		if c := st.tap.Load(); c != nil {
			if err := c.notifyToolsChanged(); err != nil {
				logf("storm: %v", err)
				return
			}
			continue
		}
		time.Sleep(12 * time.Millisecond)
	}
}

// middleware counts tools/call requests (crashing during call N+1 when
// MCPTEST_CRASH_AFTER=N) and adds duplicate or broken tools to the first
// page of tools/list when asked.
func middleware(st *state) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/call":
				n := st.calls.Add(1)
				if st.cfg.crashAfter > 0 && n > int64(st.cfg.crashAfter) {
					logf("exiting during call %d as asked (MCPTEST_CRASH_AFTER=%d)", n, st.cfg.crashAfter)
					os.Exit(4)
				}
			case "tools/list":
				if !st.cfg.dupTools && !st.cfg.badSchema {
					break
				}
				res, err := next(ctx, method, req)
				if err != nil {
					return res, err
				}
				lr, ok := res.(*mcp.ListToolsResult)
				if p, _ := req.GetParams().(*mcp.ListToolsParams); !ok || (p != nil && p.Cursor != "") {
					return res, nil
				}
				out := *lr
				out.Tools = append(append([]*mcp.Tool(nil), lr.Tools...), extraTools(st.cfg)...)
				return &out, nil
			}
			return next(ctx, method, req)
		}
	}
}

// extraTools are the tool definitions go-sdk's server would not let us
// register.
func extraTools(cfg config) []*mcp.Tool {
	var ts []*mcp.Tool
	if cfg.dupTools {
		ts = append(ts, &mcp.Tool{Name: "echo", Description: "A second tool named echo.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)})
	}
	if cfg.badSchema {
		ts = append(ts,
			&mcp.Tool{Name: "bad_type_string", Description: "Input schema is not an object schema.",
				InputSchema: json.RawMessage(`{"type":"string"}`)},
			&mcp.Tool{Name: "bad_not_object", Description: "Input schema is a number.",
				InputSchema: json.RawMessage(`42`)},
			&mcp.Tool{Name: "bad_null", Description: "Input schema is null."},
			&mcp.Tool{Name: "bad_ref", Description: "Input schema has a dangling $ref.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/missing"}}}`)},
			&mcp.Tool{Name: "bad_header", Description: "Two properties claim the same x-mcp-header.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{` +
					`"a":{"type":"string","x-mcp-header":"X-Same"},"b":{"type":"string","x-mcp-header":"x-same"}}}`)},
			&mcp.Tool{Name: "bad name!", Description: "Name has invalid characters.", InputSchema: objectSchema},
		)
	}
	return ts
}
