package gateway

import (
	"container/list"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionTable caps the gateway's Streamable HTTP sessions. go-sdk keeps
// every session until its client sends DELETE or it has been idle for
// SessionTimeout; a client that never says goodbye (a killed agent, a
// script that reconnects in a loop) would otherwise grow the table without
// bound. At the cap, a new session evicts the least recently used idle
// one: a session with no request in flight, its standalone GET stream
// included, so a connected client that listens is never evicted. If every
// session is busy, the new one is refused (503).
//
// Why evict rather than refuse: sessions abandoned without DELETE are the
// ordinary case (every killed client leaves one), and refusing new clients
// until those time out would lock out the next agent for up to the idle
// timeout. Eviction costs only the session silent the longest; its client,
// if it comes back, gets 404, which the MCP transport spec answers by
// initializing a new session.
//
// The table also closes sessions idle for timeout (no request in flight,
// none answered since), as go-sdk's SessionTimeout would: go-sdk's timer
// sees only the requests it serves, and the fast call path (fastcall.go)
// answers most calls without it.
type sessionTable struct {
	max     int
	server  *mcp.Server
	timeout time.Duration // 0: never

	mu      sync.Mutex
	byID    map[string]*list.Element // of *sessionEntry
	lru     *list.List               // front: most recently used
	pending int                      // initializes admitted, not yet in byID
}

type sessionEntry struct {
	id     string
	active int                // requests in flight
	posts  int                // of which POSTs (a GET stream is no activity: go-sdk's rule)
	ss     *mcp.ServerSession // go-sdk's session, once looked up
	idle   *time.Timer        // closes the session once idle for the timeout
}

func newSessionTable(max int, server *mcp.Server, timeout time.Duration) *sessionTable {
	return &sessionTable{max: max, server: server, timeout: timeout, byID: map[string]*list.Element{}, lru: list.New()}
}

// begin marks a request of session id in flight (post: a POST, which
// pauses the idle timer) and returns go-sdk's session of that ID (nil if
// go-sdk holds none). It reports false for an ID the table does not hold
// (go-sdk answers it: 404 if it is unknown).
func (t *sessionTable) begin(id string, post bool) (*mcp.ServerSession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byID[id]
	if !ok {
		return nil, false
	}
	s := e.Value.(*sessionEntry)
	s.active++
	if post {
		s.posts++
		if s.idle != nil {
			s.idle.Stop()
		}
	}
	t.lru.MoveToFront(e)
	return t.lookup(s), true
}

// lookup returns go-sdk's session of s (nil if go-sdk holds none). t.mu
// is held.
func (t *sessionTable) lookup(s *sessionEntry) *mcp.ServerSession {
	if s.ss == nil {
		for ss := range t.server.Sessions() {
			if ss.ID() == s.id {
				s.ss = ss
				break
			}
		}
	}
	return s.ss
}

// end marks a request of session id answered (post as given to begin).
func (t *sessionTable) end(id string, post bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byID[id]; ok {
		s := e.Value.(*sessionEntry)
		s.active--
		t.lru.MoveToFront(e)
		if post {
			s.posts--
			if s.posts == 0 && s.idle != nil {
				s.idle.Reset(t.timeout)
			}
		}
	}
}

// expire closes session s if it is still held and idle: its idle timer
// fired.
func (t *sessionTable) expire(s *sessionEntry) {
	t.mu.Lock()
	e, ok := t.byID[s.id]
	if !ok || e.Value != s || s.posts > 0 {
		t.mu.Unlock()
		return
	}
	t.lru.Remove(e)
	delete(t.byID, s.id)
	ss := t.lookup(s)
	t.mu.Unlock()
	if ss != nil {
		_ = ss.Close() // go-sdk forgets it; its client gets 404 and starts anew
	}
}

// admit makes room for a new session: it forgets sessions go-sdk has
// closed (DELETE, idle timeout), then evicts the least recently used idle
// one if the table is still full. It reports false if every session is
// busy. An admitted initialize must be followed by added.
func (t *sessionTable) admit() bool {
	ok, evicted := t.makeRoom()
	for _, ss := range evicted {
		_ = ss.Close() // go-sdk forgets it; prompt: it has no request in flight
	}
	return ok
}

func (t *sessionTable) makeRoom() (bool, []*mcp.ServerSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID)+t.pending < t.max {
		t.pending++
		return true, nil
	}
	live := map[string]*mcp.ServerSession{}
	for ss := range t.server.Sessions() {
		if id := ss.ID(); id != "" {
			live[id] = ss
		}
	}
	for id, e := range t.byID {
		if live[id] == nil {
			t.lru.Remove(e)
			delete(t.byID, id)
		}
	}
	var evicted []*mcp.ServerSession
	for len(t.byID)+t.pending >= t.max {
		victim := t.lru.Back()
		for victim != nil && victim.Value.(*sessionEntry).active > 0 {
			victim = victim.Prev()
		}
		if victim == nil {
			return false, evicted
		}
		s := victim.Value.(*sessionEntry)
		t.lru.Remove(victim)
		delete(t.byID, s.id)
		if s.idle != nil {
			s.idle.Stop()
		}
		if ss := live[s.id]; ss != nil {
			evicted = append(evicted, ss)
		}
	}
	t.pending++
	return true, evicted
}

// added records the session an admitted initialize created (id "" if it
// created none).
func (t *sessionTable) added(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending--
	if id == "" {
		return
	}
	if _, ok := t.byID[id]; ok {
		return
	}
	s := &sessionEntry{id: id}
	if t.timeout > 0 {
		s.idle = time.AfterFunc(t.timeout, func() { t.expire(s) })
	}
	t.byID[id] = t.lru.PushFront(s)
}

// stop stops the idle timers: the gateway is closing its sessions.
func (t *sessionTable) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.byID {
		if s := e.Value.(*sessionEntry); s.idle != nil {
			s.idle.Stop()
		}
	}
}

// len returns the number of sessions held.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}
