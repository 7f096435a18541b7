// Package impure breaks every rule of the determinism guard; deps_test.go
// checks that the guard notices each one.
package impure

import (
	"math/rand"
	"time"
)

// Bad does what fsm/ and projections/ must never do.
func Bad(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	go func() {}()
	_ = time.Now()
	_ = rand.Int()
	return out
}
