package runtime

import (
	"context"
	"net"
	"sync"
)

// connSet tracks the TCP connections an HTTP/SSE attempt's transport has
// open, so that teardown can end them: http.Transport closes only idle
// ones, and a stream that is being read (SSE) holds its connection until
// the server sends something.
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{conns: map[*trackedConn]struct{}{}} }

// dial returns d.DialContext recording each connection in s. After
// closeAll it dials nothing.
func (s *connSet) dial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: nc, set: s}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			_ = nc.Close()
			return nil, net.ErrClosed
		}
		s.conns[tc] = struct{}{}
		return tc, nil
	}
}

// closeAll closes every connection still open and any dialed later.
func (s *connSet) closeAll() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[*trackedConn]struct{}{}
	s.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// trackedConn leaves its set when closed.
type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}
