package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/mcpledger/mcpledger/events"
)

// ErrEffectMismatch is returned by Reenact when a recorded observation
// answers an effect the runtime, re-enacting the session, never asked for:
// an observation of a server attempt it did not launch, or a timer fire of
// a timer it did not schedule.
var ErrEffectMismatch = errors.New("runtime: re-enactment diverged from the recorded effects")

// Reenact drives the real Manager (its loop, batching, decider and effect
// dispatch) through a recorded session against a fake world that serves
// the recorded answers: spawn results, handshakes, tool lists, call
// results, exits and timer fires arrive as recorded, in recorded order,
// each only once the Manager has asked for it (launched that attempt,
// scheduled that timer). Nothing is spawned, dialed or slept on. It
// returns the events the Manager journaled, which the caller compares with
// the recording (replay.Compare); set a breakpoint in the decider or the
// loop to step through a post-mortem.
func Reenact(ctx context.Context, recorded []events.Event) ([]events.Event, error) {
	if len(recorded) == 0 {
		return nil, errors.New("runtime: nothing to re-enact")
	}
	start, ok := recorded[0].Payload.(*events.SessionStarted)
	if !ok {
		return nil, fmt.Errorf("runtime: a session starts with session.started, this one with %s", recorded[0].Kind)
	}
	cj := &captureJournal{}
	m, err := New(cj, &Options{Seed: start.Seed, Decider: start.Options, PingInterval: -1})
	if err != nil {
		return nil, err
	}
	w := &fakeWorld{launched: map[attemptKey]bool{}, timers: map[uint64]bool{}}
	m.world = w
	m.goFunc(m.loop)
	m.started.Store(true)
	defer func() {
		m.cancel()
		m.wg.Wait()
	}()
	for _, rec := range recorded {
		if !rec.Kind.IsInput() {
			continue
		}
		if err := w.expect(rec); err != nil {
			return cj.snapshot(), err
		}
		in := rec
		in.ID, in.Seq, in.GPos, in.Session, in.Cause = uuid.Nil, 0, 0, uuid.Nil, 0
		r := &request{ev: in, durable: true}
		if _, err := m.submitReq(ctx, r); err != nil {
			return cj.snapshot(), fmt.Errorf("runtime: re-enacting input seq %d (%s %s): %w", rec.Seq, rec.Kind, rec.Server, err)
		}
	}
	return cj.snapshot(), nil
}

type attemptKey struct {
	server  string
	attempt int
}

// fakeWorld records the effects the Manager asks for instead of running
// them. It is touched only by the loop goroutine and, between inputs, by
// Reenact (the loop is idle then: each input is answered before the next).
type fakeWorld struct {
	mu       sync.Mutex
	launched map[attemptKey]bool
	timers   map[uint64]bool
}

func (w *fakeWorld) launch(server string, attempt int) {
	w.mu.Lock()
	w.launched[attemptKey{server, attempt}] = true
	w.mu.Unlock()
}

func (w *fakeWorld) timer(id uint64) {
	w.mu.Lock()
	w.timers[id] = true
	w.mu.Unlock()
}

// expect checks that a recorded observation answers an effect the Manager
// asked for.
func (w *fakeWorld) expect(e events.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	attempt := -1
	switch p := e.Payload.(type) {
	case *events.ProcessSpawned:
		attempt = p.Attempt
	case *events.TransportOpened:
		attempt = p.Attempt
	case *events.ConnectFailed:
		attempt = p.Attempt
	case *events.HandshakeCompleted:
		attempt = p.Attempt
	case *events.ToolsListed:
		attempt = p.Attempt
	case *events.ResourcesListed:
		attempt = p.Attempt
	case *events.PromptsListed:
		attempt = p.Attempt
	case *events.PingFailed:
		attempt = p.Attempt
	case *events.ProcessExited:
		attempt = p.Attempt
	case *events.TransportClosed:
		attempt = p.Attempt
	case *events.TimerFired:
		if !w.timers[p.TimerID] {
			return fmt.Errorf("%w: seq %d: timer %d fired, but the runtime never scheduled it", ErrEffectMismatch, e.Seq, p.TimerID)
		}
	}
	if attempt > 0 && !w.launched[attemptKey{e.Server, attempt}] {
		return fmt.Errorf("%w: seq %d: %s answers attempt %d of %s, which the runtime never launched", ErrEffectMismatch, e.Seq, e.Kind, attempt, e.Server)
	}
	return nil
}

// captureJournal is an in-memory Journal that keeps what it is given.
type captureJournal struct {
	mu  sync.Mutex
	evs []events.Event
}

func (c *captureJournal) Append(_ context.Context, _ uuid.UUID, evs []events.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, evs...)
	return nil
}

func (c *captureJournal) AppendLater(sid uuid.UUID, evs []events.Event) func(context.Context) error {
	err := c.Append(context.Background(), sid, evs)
	return func(context.Context) error { return err }
}

func (c *captureJournal) ReadAll(context.Context, uint64, func(events.Event) error) error { return nil }

func (c *captureJournal) snapshot() []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Event(nil), c.evs...)
}
