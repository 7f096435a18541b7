package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Tool naming: how a server's tool is named in the catalog the agent sees.
const (
	// ToolNamePrefix starts every catalog name.
	ToolNamePrefix = "mcp__"
	// ToolNameSep separates the server part from the tool part.
	ToolNameSep = "__"
	// MaxToolNameLen is the longest catalog name, in bytes. Names are ASCII.
	MaxToolNameLen = 64
	// toolHashLen is the number of hex digits of the disambiguating suffix.
	toolHashLen = 8
)

// suffixLens are the hex lengths tried, in order, when suffixed names still
// collide: a collision of 8 hex digits of SHA-256 between two different
// tools is astronomically rare, and one of 32 digits does not happen.
var suffixLens = [...]int{0, toolHashLen, 16, 32}

// ToolRef identifies a tool by its server's name and the tool's own name,
// both as the server and config wrote them.
type ToolRef struct {
	Server string
	Tool   string
}

// sanitizePart replaces every rune outside [A-Za-z0-9_-] with '_'. It
// returns s itself when nothing needs replacing.
func sanitizePart(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s { // one '_' per rune, also per invalid UTF-8 byte
		if r < 0x80 && nameByte(byte(r)) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// plainName is the sanitized name before any length or collision handling.
func plainName(server, tool string) string {
	return ToolNamePrefix + sanitizePart(server) + ToolNameSep + sanitizePart(tool)
}

// refHash returns the hex SHA-256 of server "\x00" tool: the original names,
// so two tools that sanitize alike still hash apart.
func refHash(server, tool string) string {
	h := sha256.New()
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	return hex.EncodeToString(h.Sum(nil))
}

// suffixed truncates plain so that "_" and n digits of hash (a [refHash])
// fit in [MaxToolNameLen], and appends them.
func suffixed(plain, hash string, n int) string {
	keep := MaxToolNameLen - 1 - n
	if len(plain) > keep {
		plain = plain[:keep]
	}
	return plain + "_" + hash[:n]
}

// ToolName returns the catalog name of one tool considered alone:
// "mcp__<server>__<tool>" with each part sanitized to [A-Za-z0-9_-] (any
// other character becomes '_'). A name longer than [MaxToolNameLen] is
// truncated and ends in "_" and the first 8 hex digits of
// SHA-256(server "\x00" tool). It ignores collisions with other tools; the
// catalog names its entries with [ToolNames].
func ToolName(server, tool string) string {
	p := plainName(server, tool)
	if len(p) <= MaxToolNameLen {
		return p
	}
	return suffixed(p, refHash(server, tool), toolHashLen)
}

// ToolNames returns the catalog name of every distinct ref. Each name is
// [ToolName] unless two different refs would get the same name; then every
// ref in the collision gets the hash suffix (not just the later one), so the
// result depends only on the set of refs, never on their order. If suffixed
// names still collide, the colliding ones get longer suffixes (16, then 32
// hex digits). Every name is at most [MaxToolNameLen] bytes, and the names
// of distinct refs differ unless 128 bits of SHA-256 collide.
func ToolNames(refs []ToolRef) map[ToolRef]string {
	names := nameRefs(refs)
	out := make(map[ToolRef]string, len(refs))
	for i, r := range refs {
		out[r] = names[i]
	}
	return out
}

// nameRefs returns the [ToolNames] name of each ref: names[i] is refs[i]'s.
// Equal refs get the same name.
func nameRefs(refs []ToolRef) []string {
	type slot struct {
		ref   ToolRef
		plain string
		level int    // index into suffixLens
		hash  string // refHash, computed when first needed
		name  string
	}
	// One slot per distinct ref: sort the refs' indices, then merge equal
	// neighbours.
	order := make([]int, len(refs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return compareRefs(refs[a], refs[b]) })
	slotOf := make([]int, len(refs))
	slots := make([]slot, 0, len(refs))
	for k, i := range order {
		if k == 0 || refs[i] != refs[order[k-1]] {
			r := refs[i]
			s := slot{ref: r, plain: plainName(r.Server, r.Tool)}
			if len(s.plain) > MaxToolNameLen {
				s.level = 1
			}
			slots = append(slots, s)
		}
		slotOf[i] = len(slots) - 1
	}
	name := func(s *slot) string {
		if s.level == 0 {
			return s.plain
		}
		if s.hash == "" {
			s.hash = refHash(s.ref.Server, s.ref.Tool)
		}
		return suffixed(s.plain, s.hash, suffixLens[s.level])
	}
	// Move every slot whose name another slot shares to its next suffix
	// length, all at once; repeat until no shared name can move. Each round
	// depends only on the set of names, so the result does not depend on
	// the order of refs.
	count := make(map[string]int, len(slots))
	for {
		clear(count)
		for i := range slots {
			slots[i].name = name(&slots[i])
			count[slots[i].name]++
		}
		bumped := false
		for i := range slots {
			if count[slots[i].name] > 1 && slots[i].level < len(suffixLens)-1 {
				slots[i].level++
				bumped = true
			}
		}
		if !bumped {
			break
		}
	}
	names := make([]string, len(refs))
	for i := range refs {
		names[i] = slots[slotOf[i]].name
	}
	return names
}

func compareRefs(a, b ToolRef) int {
	if c := strings.Compare(a.Server, b.Server); c != 0 {
		return c
	}
	return strings.Compare(a.Tool, b.Tool)
}
