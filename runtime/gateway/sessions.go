package gateway

import (
	"container/list"
	"sync"

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
type sessionTable struct {
	max    int
	server *mcp.Server

	mu      sync.Mutex
	byID    map[string]*list.Element // of *sessionEntry
	lru     *list.List               // front: most recently used
	pending int                      // initializes admitted, not yet in byID
}

type sessionEntry struct {
	id     string
	active int // requests in flight
}

func newSessionTable(max int, server *mcp.Server) *sessionTable {
	return &sessionTable{max: max, server: server, byID: map[string]*list.Element{}, lru: list.New()}
}

// begin marks a request of session id in flight. It reports false for an
// ID the table does not hold (go-sdk answers it: 404 if it is unknown).
func (t *sessionTable) begin(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byID[id]
	if !ok {
		return false
	}
	e.Value.(*sessionEntry).active++
	t.lru.MoveToFront(e)
	return true
}

// end marks a request of session id answered.
func (t *sessionTable) end(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byID[id]; ok {
		s := e.Value.(*sessionEntry)
		s.active--
		t.lru.MoveToFront(e)
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
	t.byID[id] = t.lru.PushFront(&sessionEntry{id: id})
}

// len returns the number of sessions held.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}
