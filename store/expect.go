package store

import "strconv"

// Expect is an append's expectation about the session's current version
// (its last seq), checked by the writer inside the commit: [Any],
// [NoStream] or [Exact]. The zero value is Any.
type Expect struct {
	kind expectKind
	n    uint64
}

type expectKind uint8

const (
	expectAny expectKind = iota
	expectNoStream
	expectExact
)

var (
	// Any appends whatever the session's version.
	Any = Expect{}
	// NoStream appends only if the session has no events yet.
	NoStream = Expect{kind: expectNoStream}
)

// Exact appends only if the session's last seq is n. Exact(0) is
// [NoStream].
func Exact(n uint64) Expect {
	if n == 0 {
		return NoStream
	}
	return Expect{kind: expectExact, n: n}
}

// allows reports whether a session whose last seq is last meets e.
func (e Expect) allows(last uint64) bool {
	switch e.kind {
	case expectNoStream:
		return last == 0
	case expectExact:
		return last == e.n
	}
	return true
}

// String returns "any", "no stream" or "exact N".
func (e Expect) String() string {
	switch e.kind {
	case expectNoStream:
		return "no stream"
	case expectExact:
		return "exact " + strconv.FormatUint(e.n, 10)
	}
	return "any"
}
