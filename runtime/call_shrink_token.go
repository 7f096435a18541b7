package runtime

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/mcpledger/mcpledger/runtime/internal/swar"
)

// ---- the shrinker's tokens: strings read a character at a time (a prefix
// kept), numbers and literals ----

// strScan is the string a shrinker is reading. A character is one unit
// of the JSON text: a UTF-8 sequence (an invalid byte counts alone, as
// the decoder replaces it with U+FFFD), an escape, or an escaped
// surrogate pair. A prefix of whole units is written, so the output never
// splits a character, an escape or a pair.
type strScan struct {
	role    role
	keeping bool    // characters are still written
	chars   int64   // characters read
	kept    int     // characters written
	pend    [4]byte // a multi-byte character not complete yet
	np      int
	esc     [12]byte // an escape being read
	ne      int
	typ     []byte // a block's type, raw, up to 16 bytes
	sig     int    // base64: significant characters written
	cutAt   int    // base64: the output's length at the last whole quantum
}

// stringBytes reads string bytes from b up to and including the closing
// quote and returns how many it took.
func (s *shrinker) stringBytes(b []byte) int {
	st := &s.str
	i := 0
	for i < len(b) && s.err == nil {
		c := b[i]
		if st.ne > 0 {
			if s.escByte(c) {
				i++
			}
			continue
		}
		switch {
		case c == '"':
			s.flushPending()
			s.endString()
			return i + 1
		case c == '\\':
			s.flushPending()
			st.esc[0], st.ne = '\\', 1
			i++
		case c < 0x20:
			return s.fail()
		case c < utf8.RuneSelf && st.np > 0:
			s.flushPending() // an incomplete sequence: c is read next
		case !st.keeping && st.np == 0 && !s.inKey && st.role != roleID && st.role != roleType:
			i += s.skipText(b[i:]) // not kept: counted a run at a time
		case c < utf8.RuneSelf:
			j := i + runLen(b[i:], true)
			s.ascii(b[i:j])
			i = j
		default:
			st.pend[st.np] = c
			st.np++
			i++
			for st.np > 0 && utf8.FullRune(st.pend[:st.np]) {
				_, n := utf8.DecodeRune(st.pend[:st.np])
				s.unit(st.pend[:n])
				copy(st.pend[:], st.pend[n:st.np])
				st.np -= n
			}
		}
	}
	return max(i, 1)
}

// skipText counts the characters of a run of text not kept (up to a
// quote, a backslash or a control character), leaving an incomplete last
// character for the next piece, and returns the bytes it took.
func (s *shrinker) skipText(b []byte) int {
	st := &s.str
	n := runLen(b, false)
	seg := b[:n]
	if n == len(b) { // the piece ends inside the run: its last character may go on
		for back := 1; back <= min(3, n); back++ {
			if c := seg[n-back]; utf8.RuneStart(c) {
				if !utf8.FullRune(seg[n-back:]) {
					st.np = copy(st.pend[:], seg[n-back:])
					seg = seg[:n-back]
				}
				break
			}
		}
	}
	if len(seg) > 0 {
		st.chars += int64(swar.RuneCount(unsafe.String(&seg[0], len(seg)))) // read only, here
	}
	return n
}

// runLen returns the length of the run of string bytes at the start of b
// that need no look one by one: bytes other than a control character, '"'
// and '\\', and, when ascii, other than a byte of a non-ASCII character.
// It reads eight bytes at a step.
func runLen(b []byte, ascii bool) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		y := x &^ swar.High
		// On the low 7 bits of each byte (no sum leaves its byte), the high
		// bit of y+0x60 is set for 0x20 and up, that of (y^c)+0x7f for bytes
		// other than c.
		fine := (y + 0x6060606060606060) & ((y ^ 0x2222222222222222) + 0x7f7f7f7f7f7f7f7f) &
			((y ^ 0x5c5c5c5c5c5c5c5c) + 0x7f7f7f7f7f7f7f7f)
		stop := ^fine &^ x & swar.High // an ASCII byte that stops the run
		if ascii {
			stop |= x & swar.High
		}
		if stop != 0 {
			return i + bits.TrailingZeros64(stop)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' || ascii && c >= utf8.RuneSelf {
			break
		}
	}
	return i
}

// flushPending reads the bytes of an incomplete sequence one by one: each
// is a character of its own to the decoder.
func (s *shrinker) flushPending() {
	st := &s.str
	for k := 0; k < st.np; k++ {
		s.unit(st.pend[k : k+1])
	}
	st.np = 0
}

// ascii reads a run of plain ASCII characters: a character a byte.
func (s *shrinker) ascii(r []byte) {
	st := &s.str
	if s.inKey || st.role == roleID || st.role == roleType || st.role == roleBase64 && st.keeping {
		for k := range r {
			s.unit(r[k : k+1])
		}
		return
	}
	n := 0
	if st.keeping {
		n = min(len(r), s.lim.keep-st.kept)
		if st.role == roleFree {
			n = min(n, max(0, s.val.end-len(s.out)-s.reserved-noteRoom))
		}
		s.out = append(s.out, r[:n]...)
		st.kept += n
		if n < len(r) {
			st.keeping = false
		}
	}
	st.chars += int64(len(r))
}

// escByte reads a byte of an escape and reports whether it took it (an
// escaped high surrogate not followed by an escape ends before c).
func (s *shrinker) escByte(c byte) bool {
	st := &s.str
	switch {
	case st.ne == 6 || st.ne == 7 && c != 'u': // after a high surrogate
		if st.ne == 6 && c != '\\' {
			s.unit(st.esc[:6])
			st.ne = 0
			return false
		}
		if st.ne == 7 { // \ then not u: the surrogate alone, then a short escape
			s.unit(st.esc[:6])
			st.esc[0], st.ne = '\\', 1
			return s.escByte(c)
		}
	case st.ne == 1:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			st.esc[1] = c
			s.unit(st.esc[:2])
			st.ne = 0
			return true
		case 'u':
		default:
			s.fail()
			return true
		}
	case !isHex(c) && st.ne != 7:
		s.fail()
		return true
	}
	st.esc[st.ne] = c
	st.ne++
	switch st.ne {
	case 6:
		if code := hex4(st.esc[2:6]); code < 0xd800 || code > 0xdbff {
			s.unit(st.esc[:6])
			st.ne = 0
		}
	case 12:
		if code := hex4(st.esc[8:12]); code >= 0xdc00 && code <= 0xdfff {
			s.unit(st.esc[:12]) // a pair: one character
			st.ne = 0
			break
		}
		// The surrogate alone; the second escape starts over.
		s.unit(st.esc[:6])
		again := st.esc[6:12]
		st.ne = 1
		for _, b := range again[1:] {
			s.escByte(b)
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hex4(b []byte) int {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return int(n)
}

// unit reads one character, u its bytes as written.
func (s *shrinker) unit(u []byte) {
	st := &s.str
	st.chars++
	switch {
	case s.inKey:
		if len(s.key)+len(u) > maxKey {
			s.fail()
		}
		s.key = append(s.key, u...)
		return
	case st.role == roleID:
		if len(s.id)+len(u) > 64 {
			s.fail()
		}
		s.id = append(s.id, u...)
	case st.role == roleType && len(st.typ) < 16:
		st.typ = append(st.typ, u...)
	}
	if !st.keeping {
		return
	}
	if st.role != roleID && st.kept >= s.lim.keep && (st.role != roleType || st.kept >= 64) ||
		st.role == roleFree && len(s.out)+len(u)+s.reserved+noteRoom > s.val.end {
		st.keeping = false
		return
	}
	s.out = append(s.out, u...)
	st.kept++
	if st.role == roleBase64 && base64Char(u) {
		st.sig++
		if st.sig%4 == 0 {
			st.cutAt = len(s.out)
		}
	}
}

// base64Char reports whether the character u (as written in JSON) is one
// a base64 decoder counts.
func base64Char(u []byte) bool {
	c := u[0]
	switch {
	case len(u) == 2:
		c = u[1] // only \/ is in the alphabet
	case len(u) == 6:
		code := hex4(u[2:6])
		if code >= utf8.RuneSelf {
			return false
		}
		c = byte(code)
	case len(u) != 1:
		return false
	}
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

// endString ends the string at its closing quote.
func (s *shrinker) endString() {
	st := &s.str
	if s.inKey {
		s.inKey = false
		s.member()
		if s.st == lexString {
			s.st = lexColon
		}
		return
	}
	if s.val.emit {
		if cut := st.chars - int64(st.kept); cut > 0 {
			switch st.role {
			case roleFree:
				s.out = append(s.out, "…[mcpledger: "+strconv.FormatInt(cut, 10)+" characters cut]"...)
			case roleBase64:
				s.out = s.out[:st.cutAt]
			}
		}
		s.out = append(s.out, '"')
	}
	switch st.role {
	case roleID:
		s.id = append(s.id, '"')
	case roleText:
		s.top().chars += st.chars
	case roleType:
		s.top().typ = append(append(append(s.top().typ[:0], '"'), st.typ...), '"')
	}
	s.after()
}

// numberBytes reads a number's bytes (checked when it ends).
func (s *shrinker) numberBytes(b []byte) int {
	i := 0
	for ; i < len(b); i++ {
		c := b[i]
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			break
		}
	}
	if len(s.scalar)+i > maxScalar {
		return s.fail()
	}
	s.scalar = append(s.scalar, b[:i]...)
	if i == len(b) {
		return i // it may go on
	}
	s.endScalar()
	return i // the delimiter is read as the next token
}

func (s *shrinker) literalBytes(b []byte) int {
	i := 0
	for ; i < len(b) && len(s.scalar) < len(s.literal); i++ {
		if b[i] != s.literal[len(s.scalar)] {
			return s.fail()
		}
		s.scalar = append(s.scalar, b[i])
	}
	if len(s.scalar) == len(s.literal) {
		s.endScalar()
	}
	return max(i, 1)
}

// endScalar checks a number or literal that ended and writes it.
func (s *shrinker) endScalar() {
	if s.st == lexNumber && !validNumber(s.scalar) {
		s.fail()
		return
	}
	s.emit(s.scalar...)
	if s.val.role == roleID {
		s.id = append(s.id[:0], s.scalar...)
	}
	s.after()
}

// validNumber reports whether b is a JSON number.
func validNumber(b []byte) bool {
	i := 0
	digits := func() bool {
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if !digits() {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(b)
}
