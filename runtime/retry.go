package runtime

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// retriable reports whether a failed tools/list or ping is worth another
// try on the same session: a transport failure of that one request that
// may pass (go-sdk's HTTP "rejected by transport", a reset or refused
// connection, a network timeout). Not retriable: a protocol error from a
// live server (it answered), a session that is gone (closed, EOF, session
// missing: only a reconnect helps, and the decider does that), and the
// try's own deadline (a hung server is what health checks must notice).
func retriable(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return false
	}
	if _, ok := protocolError(err); ok {
		return false
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return isRejected(err)
}

// isRejected reports whether err is go-sdk's per-request HTTP transport
// rejection (code -32005: a 429/5xx or a network error of one POST).
func isRejected(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == codeRejected
}

// retry runs try until it succeeds, fails with an error that is not
// retriable, or has run o.Attempts times; it waits o.Backoff before the
// second try, doubling up to o.MaxBackoff. It stops early when ctx ends.
// It returns the last error.
func retry(ctx context.Context, o RetryOptions, try func(context.Context) error) error {
	wait := o.Backoff
	var err error
	for n := 1; ; n++ {
		if err = try(ctx); err == nil || !retriable(err) || n >= o.Attempts {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, o.MaxBackoff)
	}
}
