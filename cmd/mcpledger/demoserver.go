package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoServerCmd is the hidden command the demo re-executes the binary
// with: `mcpledger __demo-server KIND` serves MCP over stdio.
const demoServerCmd = "__demo-server"

type noteArgs struct {
	Text string `json:"text" jsonschema:"the note to keep"`
}

type echoArgs struct {
	Message string `json:"message" jsonschema:"what to echo back"`
}

// runDemoServer serves one of the demo's MCP servers over stdio:
//
//	notes   healthy: add_note, list_notes
//	flaky   echo; exits with code 1 every few seconds, saying so on stderr
//	slow    clock; takes 1.5 s to start
func runDemoServer(ctx context.Context, kind string) error {
	s := mcp.NewServer(&mcp.Implementation{Name: "demo-" + kind, Version: "1.0.0"}, nil)
	switch kind {
	case "notes":
		var mu sync.Mutex
		var notes []string
		mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Keep a note for later"}, func(_ context.Context, _ *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			notes = append(notes, in.Text)
			n := len(notes)
			mu.Unlock()
			return text(fmt.Sprintf("kept note %d: %s", n, in.Text)), nil, nil
		})
		mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List the notes kept so far"}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			defer mu.Unlock()
			return text(fmt.Sprintf("%d notes: %q", len(notes), notes)), nil, nil
		})
	case "flaky":
		mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo a message (while the server lasts)"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return text(in.Message), nil, nil
		})
		go func() { // the process exits with it
			time.Sleep(3 * time.Second)
			fmt.Fprintln(os.Stderr, "flaky: out of luck, exiting with code 1")
			os.Exit(1)
		}()
	case "slow":
		time.Sleep(1500 * time.Millisecond)
		mcp.AddTool(s, &mcp.Tool{Name: "clock", Description: "Tell the server's time"}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text(time.Now().UTC().Format(time.RFC3339)), nil, nil
		})
	default:
		return fmt.Errorf("unknown demo server %q", kind)
	}
	return s.Run(ctx, &mcp.StdioTransport{})
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
