package runtime

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
	"github.com/mcpledger/mcpledger/projections"
	"github.com/mcpledger/mcpledger/runtime/config"
)

// Manager supervises a set of MCP servers for one session. Create it with
// [New], then [Manager.Start]; every method is safe for concurrent use.
type Manager struct {
	j    Journal
	opts Options
	log  *slog.Logger
	sid  uuid.UUID

	ctx    context.Context // the manager's own; ends at the end of Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the manager starts
	// teardown counts connections being shut down, so Close can wait for
	// their last observations (the exit of a stopped process).
	teardown sync.WaitGroup
	// afterConnect, nil outside tests, runs when a connection's Connect
	// returns (export_test.go): it widens races between a conn's own
	// goroutines so tests can pin their outcome.
	afterConnect func(error)
	// sdkCalls sends every tool call through go-sdk's client, none
	// around it (plainWire): a test hook, for comparing the two.
	sdkCalls bool

	inbox    chan *request
	loopDone chan struct{}
	// wake makes the loop re-arm its timers: a direct submitter that
	// started a hold of relaxed records needs the hold's timer armed, one
	// that degraded the Manager the retry timer (buffered, 1).
	wake chan struct{}
	// procMu is held by whoever decides and journals: the loop goroutine,
	// or a caller taking the direct path (see submitDirect). queued counts
	// the requests sent to inbox and not yet processed; loopEnded is set,
	// under procMu, once the loop has stopped deciding.
	procMu    sync.Mutex
	queued    atomic.Int64
	loopEnded bool

	// calls in flight, so Close can fail them and wait.
	callMu  sync.Mutex
	closing bool
	calls   sync.WaitGroup
	// inCalls counts the tool calls in flight (CallToolWith): an audited
	// call's record is committed on its caller's goroutine only when its
	// call is the only one (submitDirect).
	inCalls atomic.Int64
	// lastShared is how many requests the last durable commit carried
	// (the loop's linger).
	lastShared atomic.Int64
	callCtx    context.Context
	callCancel context.CancelFunc

	started   atomic.Bool
	opened    chan struct{} // closed once Start has opened the session (see Opened)
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error

	view   atomic.Pointer[View]
	subsMu sync.Mutex
	subs   map[chan *View]struct{}

	// versionMiss maps a server to the config fingerprint under which a
	// connection in the version the journal knew failed its handshake:
	// its next attempt negotiates afresh (see knownVersion).
	versionMiss sync.Map

	// callSettings are the servers' call settings of the latest config
	// reading (see setCallSettings).
	callSettings atomic.Pointer[map[string]config.CallSettings]

	// journalErr is the refusal while the journal fails (see deg), readable
	// without procMu: relaxed call records are only queued, so their
	// callers check it before sending (see submit).
	journalErr atomic.Pointer[error]

	// Owned by the holder of procMu (the loop goroutine, or a direct
	// submitter).
	state     fsm.State
	lastSeq   uint64
	cpDue     chan int     // wakes the checkpointer with the count it covers (nil: no checkpoints)
	cpSaved   atomic.Int64 // the count of the last checkpoint the checkpointer saved
	set       *projections.Set
	conns     map[string]*conn
	timers    timerHeap
	specs     map[string]config.Spec
	deg       *outage // set while the journal refuses appends (degraded.go)
	lastLater func(context.Context) error
	held      []events.Event // relaxed records not yet handed to the journal (see hold)
	flushed   []events.Event // relaxed records handed to the journal, their commit not yet seen
	heldSince time.Time      // when the oldest of held was decided
	history   history
	world     *fakeWorld // set only by Reenact: effects are recorded, not run

	// reaper guards the stdio servers' process groups against this
	// process's death (nil without Options.ShimPath).
	reaper *reaper
}

// request is one input for the loop: an event to decide and journal, and
// whoever waits for it.
type request struct {
	ev      events.Event
	noEvent bool         // only run prepare on the loop; nothing to decide
	prepare func()       // runs on the loop before the input is decided
	check   func() error // runs on the loop after prepare; an error refuses the input unjournaled
	durable bool         // reply only once the batch is durable
	conn    *conn        // the connection an observation comes from
	reply   chan result  // buffered; nil when nobody waits
}

type result struct {
	err    error
	events []events.Event // the input and its decisions, as journaled
}

// New returns a Manager that journals to j. It does nothing until Start.
func New(j Journal, opts *Options) (*Manager, error) {
	if j == nil {
		return nil, errors.New("runtime: nil journal")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if err := fsm.CheckOptions(o.Decider); err != nil {
		return nil, fmt.Errorf("runtime: Options.Decider: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	callCtx, callCancel := context.WithCancel(context.Background())
	m := &Manager{j: j, opts: o, log: o.Logger, sid: uuid.Must(uuid.NewV7()), ctx: ctx, cancel: cancel,
		inbox: make(chan *request, 256), loopDone: make(chan struct{}), wake: make(chan struct{}, 1), opened: make(chan struct{}), callCtx: callCtx, callCancel: callCancel,
		subs: map[chan *View]struct{}{}, set: projections.NewSet(), conns: map[string]*conn{},
		specs: map[string]config.Spec{}, reaper: newReaper(o.ShimPath, o.Logger)}
	m.view.Store(&View{Session: m.sid, index: map[string]int{}, live: map[string]*conn{}, state: map[string]projections.ServerStatus{}})
	return m, nil
}

// Session returns the ID of the session this Manager journals.
func (m *Manager) Session() uuid.UUID { return m.sid }

// goFunc runs f in a goroutine the Manager owns: Close waits for it.
func (m *Manager) goFunc(f func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f()
	}()
}

// Snapshot returns the latest published View.
func (m *Manager) Snapshot() *View { return m.view.Load() }

// Tools returns the catalog: live tools of ready servers, stale tools of
// reconnecting ones, and deferred tools (from the journal's tool cache) of
// servers still connecting. Sorted by name.
func (m *Manager) Tools() []projections.Entry { return m.view.Load().Catalog.Tools }

// Status returns one row per server, sorted by name.
func (m *Manager) Status() []projections.ServerStatus { return m.view.Load().Status }

// Subscribe returns a channel that receives the latest View after each
// change of status or catalog. Views are coalesced: a slow reader skips to
// the newest. cancel unsubscribes.
func (m *Manager) Subscribe() (views <-chan *View, cancel func()) {
	ch := make(chan *View, 1)
	// The first view goes in under the lock: sent after it, a publish in
	// between would have filled the one slot, and the send would block
	// for good (Start hung so, waiting on its gate).
	m.subsMu.Lock()
	ch <- m.view.Load()
	m.subs[ch] = struct{}{}
	m.subsMu.Unlock()
	return ch, func() {
		m.subsMu.Lock()
		delete(m.subs, ch)
		m.subsMu.Unlock()
	}
}

func (m *Manager) publish(v *View) {
	m.view.Store(v)
	m.subsMu.Lock()
	defer m.subsMu.Unlock()
	for ch := range m.subs {
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

// StartReport says what Start saw when its gate closed.
type StartReport struct {
	Session uuid.UUID
	// Ready, Connecting, Failed and Stopped list servers by state.
	Ready, Connecting, Failed, Stopped []string
	// Deferred counts tools served from the tool cache for servers still
	// connecting.
	Deferred int
	// Errors are config problems (unparsable files).
	Errors []string
	// Elapsed is how long Start took.
	Elapsed time.Duration
}

// Start opens the session: it records session.started and the config,
// connects every admitted server in parallel, and returns once every
// server has settled (ready, failed or stopped) or the startup gate has
// passed and every server still connecting has cached tools to offer as
// deferred. A server without cached tools is waited for up to its startup
// timeout. Start returns an error only if the journal refuses the session.
func (m *Manager) Start(ctx context.Context) (StartReport, error) {
	var rep StartReport
	var err error
	m.startOnce.Do(func() { rep, err = m.start(ctx) })
	return rep, err
}

func (m *Manager) start(ctx context.Context) (StartReport, error) {
	t0 := time.Now()
	rep := StartReport{Session: m.sid}
	if err := m.loadHistory(ctx); err != nil {
		return rep, fmt.Errorf("runtime: read journal: %w", err)
	}
	m.goFunc(m.loop)
	m.started.Store(true)
	seed := m.opts.Seed
	for seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.BigEndian.Uint64(b[:])
	}
	host, _ := os.Hostname()
	opts := fsm.WithDefaults(m.opts.Decider)
	if _, err := m.submit(ctx, "", &events.SessionStarted{Seed: seed, Build: m.opts.Build, Version: m.opts.Version,
		PID: os.Getpid(), Host: host, Command: m.opts.Command, Options: opts, Previous: m.history.previous}, true); err != nil {
		return rep, startErr(err)
	}
	lc := m.opts.Config()
	res, err := m.observeLoaded(ctx, "start", lc)
	if err != nil {
		return rep, startErr(err)
	}
	if m.opts.Watch {
		last := lc.Observed
		m.goFunc(func() { m.watchConfig(lc.Files, last) })
	}
	if p, ok := res.events[0].Payload.(*events.ConfigObserved); ok {
		rep.Errors = p.Errors
	}
	close(m.opened)
	m.waitGate(ctx, t0)
	v := m.view.Load()
	for _, s := range v.Status {
		switch s.State {
		case events.StateReady:
			rep.Ready = append(rep.Ready, s.Name)
		case events.StateFailed:
			rep.Failed = append(rep.Failed, s.Name)
		case events.StateStopped:
			rep.Stopped = append(rep.Stopped, s.Name)
		default:
			rep.Connecting = append(rep.Connecting, s.Name)
		}
	}
	for _, t := range v.Catalog.Tools {
		if t.Deferred {
			rep.Deferred++
		}
	}
	rep.Elapsed = time.Since(t0)
	return rep, nil
}

// startErr is err, Start's failure to journal the session's first
// records; a caller that gives up on Start should not be told the journal
// is retried.
func startErr(err error) error {
	var de *DegradedError
	if errors.As(err, &de) {
		return fmt.Errorf("%w: the session could not start (%w); free disk space, or fix the journal, and start again", ErrJournal, de.Err)
	}
	return err
}

// Opened is closed once Start has opened the session: session.started and
// the config are journaled and every admitted server is launching. From
// then on every method works (a call to a server still starting waits for
// it, see CallToolWith) while Start goes on waiting for its gate; a front
// end (the control socket, the gateway) can serve from then on. It is
// never closed if Start fails first.
func (m *Manager) Opened() <-chan struct{} { return m.opened }

// waitGate waits until the startup gate may close (see Start).
func (m *Manager) waitGate(ctx context.Context, t0 time.Time) {
	views, cancel := m.Subscribe()
	defer cancel()
	gate := time.NewTimer(m.opts.StartupGate)
	defer gate.Stop()
	gatePassed := false
	deadline := time.NewTimer(m.opts.StartupTimeout + time.Second)
	defer deadline.Stop()
	for {
		v := m.view.Load()
		done := true
		for _, s := range v.Status {
			if settled(s.State) {
				continue
			}
			if !gatePassed || !hasDeferred(v, s.Name) {
				done = false
			}
		}
		if done {
			return
		}
		select {
		case <-views:
		case <-gate.C:
			gatePassed = true
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		}
	}
}

func hasDeferred(v *View, server string) bool {
	for _, t := range v.Catalog.Tools {
		if t.Server == server && t.Deferred {
			return true
		}
	}
	return false
}

// observeConfig loads the config and submits it as a config.observed
// input. The loop completes it before deciding (see completeConfig).
func (m *Manager) observeConfig(ctx context.Context, trigger string) (result, error) {
	return m.observeLoaded(ctx, trigger, m.opts.Config())
}

// observeLoaded submits an already loaded config reading.
//
// A reload (any trigger but start) that could not read some file whole
// (lc.Err) is held: it journals the reading's errors, so that status and
// the CLI show them, but keeps every server as the last reading had it,
// with its spec and call settings. A file caught half-saved, or broken
// by an edit, stops nothing; the next reading that can be read whole
// applies as usual.
func (m *Manager) observeLoaded(ctx context.Context, trigger string, lc config.Reading) (result, error) {
	obs := lc.Observed
	obs.Trigger = trigger
	held := trigger != "start" && lc.Err() != nil
	specs := map[string]config.Spec{}
	for name, s := range lc.Specs {
		specs[name] = s
	}
	for _, name := range sortedNames(m.opts.InProcess) {
		if _, clash := specs[name]; clash {
			obs.Errors = append(obs.Errors, fmt.Sprintf("in-process server %q shadows a configured server of the same name; the configured one is ignored", name))
			obs.Servers = removeServer(obs.Servers, name)
		}
		c := events.ServerConfig{Name: name, Scope: events.ScopeEmbed, Transport: events.TransportInProcess, Command: "in-process:" + name}
		c.Hash = events.ConfigHash(&c)
		obs.Servers = append(obs.Servers, c)
		specs[name] = config.Spec{Config: c}
	}
	sortServers(obs.Servers)
	req := &request{ev: events.Event{Kind: events.KindConfigObserved, Payload: &obs}, durable: true}
	req.prepare = func() {
		if held {
			errs := obs.Errors
			obs = m.state.Config
			obs.Trigger, obs.Errors = trigger, errs
			obs.Servers = slices.Clone(obs.Servers) // completeConfig writes into them
			m.completeConfig(&obs)
			return
		}
		m.completeConfig(&obs)
		m.specs = specs
		m.setCallSettings(specs)
	}
	return m.submitReq(ctx, req)
}

// completeConfig fills, on the loop, what the decider needs from the
// journal: each server's crashes from earlier sessions since its last
// explicit reconnect (storm breaker) and the latest approval decision for
// gated servers.
func (m *Manager) completeConfig(obs *events.ConfigObserved) {
	for i := range obs.Servers {
		c := &obs.Servers[i]
		c.RecentCrashes = append([]int64(nil), m.history.crashes[c.Name]...)
		if !c.Gated {
			continue
		}
		if d, ok := m.set.Approvals.Lookup(obs.Workspace, c.Name); ok {
			c.Approval = events.ApprovalFact{Decision: d.Decision, Hash: d.Hash, By: d.By, At: d.At, ToolHashes: d.ToolHashes}
			if d.Hash != c.Hash && d.Config != nil {
				c.Approval.Changed = events.ChangedFields(d.Config, c)
			}
		}
	}
}
