package fsm

import (
	"encoding/binary"
	"hash/fnv"
	"slices"

	"github.com/mcpledger/mcpledger/events"
)

// BackoffCeil returns the backoff ceiling in milliseconds before retry
// number retry (1-based): base doubling per retry, capped at max.
func BackoffCeil(o events.DeciderOptions, retry int) int64 {
	c := o.BackoffBaseMs
	for i := 1; i < retry && c < o.BackoffMaxMs; i++ {
		c *= 2
	}
	return min(c, o.BackoffMaxMs)
}

// Jitter returns a full-jitter delay in [0, ceilMs] derived only from the
// session seed, the server and the attempt, so replay draws the same value
// without recording a random source.
func Jitter(seed uint64, server string, attempt int, ceilMs int64) int64 {
	if ceilMs <= 0 {
		return 0
	}
	h := fnv.New64a()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], seed)
	binary.BigEndian.PutUint64(b[8:], uint64(attempt))
	h.Write(b[:8])
	h.Write([]byte(server))
	h.Write(b[8:])
	return int64(splitmix64(h.Sum64()) % uint64(ceilMs+1))
}

// splitmix64 scrambles x so nearby inputs give unrelated outputs.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// StormHold reports whether a launch at now is held by the storm breaker:
// o.StormLimit or more of the counted times (crashes; launches at decision
// version 1) fall in the o.StormWindowMs before now, counting this
// session's and those recorded by earlier sessions (the two lists are
// disjoint: each time is in exactly one). When held, it returns when the
// window next admits a launch.
func StormHold(o events.DeciderOptions, session, earlier []int64, now int64) (held bool, until int64) {
	window := o.StormWindowMs * 1e6
	var in []int64
	for _, l := range [][]int64{session, earlier} {
		for _, t := range l {
			if t <= now && now-t < window {
				in = append(in, t)
			}
		}
	}
	if len(in) < o.StormLimit {
		return false, 0
	}
	slices.Sort(in)
	return true, in[len(in)-o.StormLimit] + window
}

// since returns the times in ts after t.
func since(ts []int64, t int64) []int64 {
	var out []int64
	for _, x := range ts {
		if x > t {
			out = append(out, x)
		}
	}
	return out
}
