package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
)

// Passthrough: requests other than tool calls that a client of the
// supervised servers makes (the gateway, mcpledger serve, is one): read a
// resource, get a prompt, complete an argument, subscribe to a resource,
// set the log level. Each goes to the live session of the server named,
// waits up to the startup timeout for a server still connecting, and has a
// deadline: the server's "timeout" (else Options.CallTimeout) for reads
// and prompts, Options.ListTimeout for the rest. Close fails them like
// calls. They are not journaled: only tool calls are.

// ReadResource reads uri (the server's own URI) from server.
func (m *Manager) ReadResource(ctx context.Context, server, uri string) (*mcp.ReadResourceResult, error) {
	var res *mcp.ReadResourceResult
	err := m.passthrough(ctx, server, true, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		return err
	})
	return res, err
}

// GetPrompt gets the prompt name (the server's own name) from server.
func (m *Manager) GetPrompt(ctx context.Context, server, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	var res *mcp.GetPromptResult
	err := m.passthrough(ctx, server, true, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		return err
	})
	return res, err
}

// Complete asks server to complete an argument; p's reference names the
// server's own prompt or resource template.
func (m *Manager) Complete(ctx context.Context, server string, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	var res *mcp.CompleteResult
	err := m.passthrough(ctx, server, false, func(ctx context.Context, cs *mcp.ClientSession) (err error) {
		res, err = cs.Complete(ctx, p)
		return err
	})
	return res, err
}

// SubscribeResource subscribes to updates of uri on server. Updates reach
// the client hooks of Options.NewClient (notifications/resources/updated).
// A subscription lasts as long as the server's session: it is not renewed
// after a reconnect.
func (m *Manager) SubscribeResource(ctx context.Context, server, uri string) error {
	return m.passthrough(ctx, server, false, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
}

// UnsubscribeResource ends a subscription made with SubscribeResource.
func (m *Manager) UnsubscribeResource(ctx context.Context, server, uri string) error {
	return m.passthrough(ctx, server, false, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
}

// SetLoggingLevel asks server to send log messages at level and above
// (logging/setLevel). Messages reach the client hooks of Options.NewClient.
func (m *Manager) SetLoggingLevel(ctx context.Context, server string, level mcp.LoggingLevel) error {
	return m.passthrough(ctx, server, false, func(ctx context.Context, cs *mcp.ClientSession) error {
		return cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level})
	})
}

// passthrough runs f on server's live session with a deadline (the call
// timeout when long, else the list timeout), counted among the calls Close
// waits for and fails.
func (m *Manager) passthrough(ctx context.Context, server string, long bool, f func(context.Context, *mcp.ClientSession) error) error {
	if !m.started.Load() {
		return ErrNotStarted
	}
	m.callMu.Lock()
	if m.closing {
		m.callMu.Unlock()
		return ErrShuttingDown
	}
	m.calls.Add(1)
	m.callMu.Unlock()
	defer m.calls.Done()

	c := m.view.Load().live[server]
	if c == nil {
		var err error
		if c, err = m.waitLive(ctx, server); err != nil {
			return err
		}
	}
	cs := c.session()
	if cs == nil {
		return &UnavailableError{Server: server, State: events.StateReconnecting, Detail: "its session just ended"}
	}
	d := m.opts.ListTimeout
	if long {
		d = m.timeoutFor(&c.spec, "")
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := context.AfterFunc(m.callCtx, cancel) // Close fails requests in flight
	defer stop()
	t0 := time.Now()
	err := f(ctx, cs)
	switch {
	case err == nil:
		return nil
	case m.callCtx.Err() != nil:
		return ErrShuttingDown
	case ctx.Err() == context.DeadlineExceeded && time.Since(t0) >= d:
		return fmt.Errorf("runtime: server %q: no answer within %s: %w", server, d, err)
	}
	return fmt.Errorf("runtime: server %q: %w", server, err)
}
