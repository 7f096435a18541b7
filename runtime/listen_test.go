package runtime_test

import (
	"errors"
	"net"
	"syscall"
	"time"
)

// rebind listens on addr, retrying for up to 5 s while the port is still
// in use (the sockets of a server just closed there), as a server
// restarted on its address would have to.
func rebind(addr string) (net.Listener, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return ln, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
