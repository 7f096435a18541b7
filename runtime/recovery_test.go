package runtime_test

import (
	"errors"
	"testing"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime"
)

// TestRecoveryNeedsAuth: a server failed for want of a sign-in names the
// sign-in as its recovery, not a reconnect (which would fail the same
// way), in Recovery and in the error a call to it gets.
func TestRecoveryNeedsAuth(t *testing.T) {
	if got, want := runtime.Recovery("gh", events.ReasonNeedsAuth, events.StateFailed), "it needs you to sign in: mcpledger login gh"; got != want {
		t.Errorf("Recovery = %q, want %q", got, want)
	}
	err := error(&runtime.UnavailableError{Server: "gh", State: events.StateFailed, Reason: events.ReasonNeedsAuth})
	if want := `runtime: server "gh" is failed (needs_auth); it needs you to sign in: mcpledger login gh`; err.Error() != want || !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("error %q, want %q", err, want)
	}
}
