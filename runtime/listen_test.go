package runtime_test

import (
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/runtime/runtimetest"
)

// Tests that restart a server on its address (a port below the ephemeral
// range, runtimetest.AddrOutsideEphemeral) retry while the port is still
// in use by the sockets of the server just closed there, as a restarted
// server would have to, for up to rebindFor.
const rebindFor = 5 * time.Second

// untilFree calls try until it succeeds, fails otherwise than with the
// port in use (inUse reports which), or rebindFor has passed.
func untilFree(try func() error, inUse func(error) bool) error {
	deadline := time.Now().Add(rebindFor)
	for {
		err := try()
		if err == nil || !inUse(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rebind listens on addr (see untilFree).
func rebind(addr string) (ln net.Listener, err error) {
	err = untilFree(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}, func(err error) bool { return errors.Is(err, syscall.EADDRINUSE) })
	return ln, err
}

// startHTTPOn starts the test server over Streamable HTTP on addr (see
// untilFree): the server's bind error is in its stderr, which the error
// carries.
func startHTTPOn(t *testing.T, bin, addr string) (url string, cmd *exec.Cmd, err error) {
	t.Helper()
	err = untilFree(func() (err error) {
		url, cmd, err = runtimetest.TryStartHTTP(t, bin, nil, "-http", addr)
		return err
	}, func(err error) bool { return strings.Contains(err.Error(), "address already in use") })
	return url, cmd, err
}
