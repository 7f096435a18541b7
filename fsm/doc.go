// Package fsm is mcpledger's pure decider: the server lifecycle table on
// looplab/fsm, admission and gating, backoff with seeded jitter, the storm
// breaker and reload verdicts.
//
// # Usage
//
// Fold a session's events into a [State] with [Evolve]. For each new input
// (a command or an observation, see events.Kind.IsInput) call
// [Decide](state, input) to get the decisions it causes, journal the input
// and the decisions together, then Evolve the state with each of them in
// order. The runtime derives its effects (spawn, connect, kill, timers) from
// the decisions; replay re-runs Decide on recorded inputs and compares.
//
//	out, err := fsm.Decide(st, in)  // pure
//	// append in, out... to the journal (durable), then:
//	st = fsm.Evolve(st, in)
//	for _, e := range out { st = fsm.Evolve(st, e) }
//
// # Lifecycle
//
// States: configuring, launching, handshaking, ready, failed, reconnecting,
// stopped. The legal transitions are the rows of one table ([Table],
// rendered by [Mermaid] into testdata/lifecycle.mmd). Every transition is
// checked by a looplab/fsm machine built from that table with no callbacks;
// an illegal one is [ErrInvalidTransition] and produces no event.
//
// # Determinism
//
// Nothing here reads a clock, draws a random number, does I/O, logs or
// starts a goroutine. Time comes from the input's envelope; backoff jitter
// is derived from the session seed (recorded in session.started), the
// server and the attempt ([Jitter]); timer IDs are counters in the state;
// maps are only ranged in sorted order. A go/ast test enforces this.
//
// # Backoff and the storm breaker
//
// A failure of the current attempt moves the server to reconnecting and
// schedules a timer: retry n waits a full-jitter delay in [0, min(max,
// base·2^(n-1))], default 1 s doubling to 30 s. MaxAttempts (default 5)
// counts the launches of an episode, the first included: when the fifth
// fails the server is failed until an explicit reconnect. With the
// defaults a crash loop therefore ends failed before the storm breaker
// (5 launches per 30 s) holds it; the breaker catches what the budget
// cannot see: restarts of mcpledger and explicit reconnects. A server
// that stayed ready StableMs (default 30 s) starts a fresh budget. The storm
// breaker allows at most StormLimit launches (default 5) per StormWindowMs
// (default 30 s), counting launches recorded by earlier sessions
// (ServerConfig.RecentLaunches), so a crash loop is held across restarts of
// mcpledger too; a held server stops with reason storm_hold and a timer
// releases it when the window allows.
package fsm
