package guard

import (
	"encoding/base64"
	"math/bits"
	"slices"
	"strings"

	"github.com/mcpledger/mcpledger/runtime/internal/swar"
)

// The base64 pass of DetectInjection: long runs of base64 are decoded
// (within bounds) and the decoded text scanned again.

// Bounds of the base64 pass: runs shorter than minBase64Run are not
// examined, each run is decoded up to maxBase64Decode bytes, and one
// scan decodes at most maxBase64Total bytes in all.
const (
	minBase64Run    = 24
	maxBase64Decode = 16 << 10
	maxBase64Total  = 256 << 10
)

// inB64Range returns 1 if the 8 bytes of x are all in ['+', 'z'] (a
// superset of the base64 run bytes), else 0, without a branch.
func inB64Range(x uint64) uint8 {
	y := x &^ swar.High
	var r uint8
	if (y+(0x80-'+')*swar.Ones)&^(y+(0x7f-'z')*swar.Ones)&^x&swar.High == swar.High {
		r = 1 // compiled to a SETEQ
	}
	return r
}

// b64Table marks the bytes of a base64 run (standard and URL alphabets,
// and padding).
var b64Table = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
	}
	return t
}()

// base64At looks at the blocks s[at:at+8] and s[at+8:at+16]: if both are
// all base64 run bytes (b64Mask) and their run (at least minBase64Run
// bytes) was not handled yet, it decodes it. The runs are met in order,
// and decoded while fewer than maxBase64Total bytes have been.
func (d *detector) base64At(s string, at int) {
	if at < d.b64Done || d.decoded >= maxBase64Total ||
		b64Mask(swar.Load64(s, at)) != swar.High || b64Mask(swar.Load64(s, at+8)) != swar.High {
		return
	}
	from, to := at, at+16
	for from >= 8 { // from stays a multiple of 8 until the run's start
		m := b64Mask(swar.Load64(s, from-8))
		from -= bits.LeadingZeros64(^m&swar.High) >> 3
		if m != swar.High {
			break
		}
	}
	for to+8 <= len(s) {
		m := b64Mask(swar.Load64(s, to))
		to += bits.TrailingZeros64(^m&swar.High) >> 3
		if m != swar.High {
			break
		}
	}
	// The last partial block, if the run reached it (after a break, s[to]
	// is not a run byte).
	for to < len(s) && b64Table[s[to]] {
		to++
	}
	if to-from >= minBase64Run {
		d.tryDecode(s[from:to])
	}
	d.b64Done = to
}

// b64Mask sets the high bit of each byte of x that is a base64 run byte
// (b64Table): in ['+', 'z'], and none of , . : ; < > ? @ [ \ ] ^ `.
func b64Mask(x uint64) uint64 {
	const ones = swar.Ones
	y := x &^ swar.High
	// A byte v < 0x80 is in [lo, hi] when v+0x80-lo has its high bit set
	// and v+0x7f-hi has not.
	m := (y + (0x80-'+')*ones) &^ (y + (0x7f-'z')*ones) &^ x & swar.High
	if m == 0 {
		return 0 // the common case, cheaply
	}
	bad := (y+(0x80-':')*ones)&^(y+(0x7f-'<')*ones) | (y+(0x80-'>')*ones)&^(y+(0x7f-'@')*ones) |
		(y+(0x80-'[')*ones)&^(y+(0x7f-'^')*ones) | swar.Eq(x, ',') | swar.Eq(x, '.') | swar.Eq(x, '`')
	return m &^ bad
}

// tryDecode decodes a base64 run (up to maxBase64Decode bytes of it) and
// scans what it holds if that is mostly printable text.
func (d *detector) tryDecode(run string) {
	run = run[:min(len(run), maxBase64Decode*4/3)]
	run = run[:len(run)/4*4]
	d.src = append(d.src[:0], strings.TrimRight(run, "=")...)
	var out []byte
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		d.buf = slices.Grow(d.buf[:0], enc.DecodedLen(len(d.src)))[:enc.DecodedLen(len(d.src))]
		if n, err := enc.Decode(d.buf, d.src); err == nil {
			out = d.buf[:n]
			break
		}
	}
	if len(out) == 0 {
		return
	}
	d.decoded += len(out)
	printable := 0
	for _, c := range out {
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' || c == '\r' || c >= 0x80 {
			printable++
		}
	}
	if printable*10 < len(out)*9 {
		return // binary (an image, say)
	}
	var inner detector
	inner.scan(string(out), false)
	d.inner = inner.names(d.inner, "base64:")
}
