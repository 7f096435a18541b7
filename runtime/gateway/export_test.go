package gateway

// SetFast2026 turns the fast path of 2026-07-28 calls on or off (off:
// go-sdk's stateless handler serves every one), for tests that compare
// the two.
func SetFast2026(g *Gateway, on bool) { g.noFast2026 = !on }
