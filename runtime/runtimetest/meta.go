package runtimetest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaServer is an in-process go-sdk server with EchoServer's echo tool
// that keeps the params._meta of every tools/call it receives: what an
// upstream server that traces would read its trace context from.
type MetaServer struct {
	*mcp.Server
	mu    sync.Mutex
	metas []mcp.Meta
}

// NewMetaServer returns a MetaServer named name.
func NewMetaServer(name string) *MetaServer {
	s := &MetaServer{Server: mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0"}, nil)}
	mcp.AddTool(s.Server, &mcp.Tool{Name: "echo", Description: "Echo a message"}, func(ctx context.Context, req *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
		s.mu.Lock()
		s.metas = append(s.metas, maps.Clone(req.Params.Meta))
		s.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	return s
}

// Metas returns the _meta of each call received so far, in order (nil for
// a call without one).
func (s *MetaServer) Metas() []mcp.Meta {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.metas)
}
