package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	rt "github.com/mcpledger/mcpledger/runtime"
)

// CallCommand calls one tool: through the running mcpledger if there is
// one, otherwise in a one-shot session that starts the servers, calls,
// and stops them (all journaled).
type CallCommand struct{ env *env }

// Run parses args and calls the tool.
func (c *CallCommand) Run(ctx context.Context, args []string) error {
	f := c.env.newCommandFlags("call", "TOOL [--args JSON] [--json]")
	var cf configFlags
	cf.register(f)
	argsJSON := f.String("args", "{}", "tool arguments as a JSON object")
	asJSON := f.Bool("json", false, "print the MCP CallToolResult as JSON")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if err := f.Parse(args); err != nil {
			return err
		}
		f.Usage()
		return usageErrorf("call: name the tool (mcpledger tools lists them)")
	}
	tool := args[0]
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	var a map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &a); err != nil {
		return usageErrorf("call: --args must be a JSON object: %v", err)
	}
	var res *mcp.CallToolResult
	if cl := f.control(); cl != nil {
		var raw json.RawMessage
		if err := cl.Do(ctx, rt.ControlRequest{Op: "call", Name: tool, Args: json.RawMessage(*argsJSON), By: "cli"}, &raw); err != nil {
			return err
		}
		res = &mcp.CallToolResult{}
		if err := json.Unmarshal(raw, res); err != nil {
			return fmt.Errorf("call: decode result: %w", err)
		}
	} else {
		j, _, err := f.openWritable()
		if err != nil {
			return err
		}
		defer j.Close()
		opts, err := cf.options(c.env, "call")
		if err != nil {
			return err
		}
		m, err := rt.New(storeJournal{j}, opts)
		if err != nil {
			return err
		}
		if _, err := m.Start(ctx); err != nil {
			m.Close()
			return err
		}
		res, err = m.CallTool(ctx, tool, a)
		if cerr := m.Shutdown("call"); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if *asJSON {
		if err := json.NewEncoder(c.env.stdout).Encode(res); err != nil {
			return err
		}
	} else {
		printResult(c.env, res)
	}
	if res.IsError {
		return errors.New("the tool reported an error")
	}
	return nil
}

// printResult writes text blocks verbatim and other blocks as JSON.
func printResult(e *env, res *mcp.CallToolResult) {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			fmt.Fprintln(e.stdout, t.Text)
			continue
		}
		b, _ := json.Marshal(c)
		fmt.Fprintln(e.stdout, string(b))
	}
	if res.StructuredContent != nil && len(res.Content) == 0 {
		b, _ := json.Marshal(res.StructuredContent)
		fmt.Fprintln(e.stdout, string(b))
	}
}
