package runtime

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/oauth"
)

// codeRejected is go-sdk's internal "rejected by transport" JSON-RPC code:
// an HTTP-level failure of one request (go-sdk-notes.md §1).
const codeRejected = -32005

// connectionLost reports whether err means the session's connection is
// gone (go-sdk-notes.md §7): closed, EOF, session missing, or an HTTP
// transport rejection carrying a network error.
func connectionLost(err error) bool {
	if err == nil || refusedSignIn(err) {
		return false
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
		// os.ErrClosed: the process was reaped and its pipe closed under
		// the reader ("file already closed").
		return true
	}
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == codeRejected {
		var ue *url.Error
		return errors.As(err, &ue) || strings.Contains(err.Error(), "connection refused")
	}
	return false
}

// refusedSignIn reports whether err is a remote server refusing a
// request for want of a sign-in or of scope (runtime/oauth): an answer
// from a live server, which did not act on the request, not a lost
// connection.
func refusedSignIn(err error) bool {
	return errors.Is(err, oauth.ErrNeedsAuth) || errors.Is(err, oauth.ErrInsufficientScope)
}

// protocolError returns the JSON-RPC error a live server answered with, if
// err is one (and not a transport rejection).
func protocolError(err error) (*jsonrpc.Error, bool) {
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code != codeRejected {
		return je, true
	}
	return nil, false
}

// classifyConnect classifies an error from connecting or initializing; a
// command that cannot run as configured is not_found or not_executable.
func classifyConnect(phase string, err error) events.ClassifiedError {
	msg := err.Error()
	var ce *commandError
	if errors.As(err, &ce) { // the config must change first: no retry
		return events.ClassifiedError{Class: ce.class, Message: msg}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return events.ClassifiedError{Class: events.ErrTimeout, Message: phase + ": " + msg}
	case strings.Contains(msg, "unsupported protocol version") || strings.Contains(msg, "protocol version"):
		return events.ClassifiedError{Class: events.ErrVersion, Message: msg}
	case connectionLost(err):
		return events.ClassifiedError{Class: events.ErrTransportClosed, Message: msg}
	}
	if _, ok := protocolError(err); ok {
		return events.ClassifiedError{Class: events.ErrProtocol, Message: msg}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, syscall.ECONNREFUSED) {
		return events.ClassifiedError{Class: events.ErrTransportClosed, Message: msg}
	}
	if phase == "spawn" {
		return events.ClassifiedError{Class: events.ErrSpawn, Message: msg}
	}
	return events.ClassifiedError{Class: events.ErrHandshake, Message: msg}
}

// classifyClosed classifies why a live session's Wait returned.
func classifyClosed(err error) events.ClassifiedError {
	if err == nil {
		return events.ClassifiedError{Class: events.ErrTransportClosed, Message: "connection closed by the server"}
	}
	return events.ClassifiedError{Class: events.ErrTransportClosed, Message: err.Error()}
}
