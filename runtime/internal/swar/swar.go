// Package swar classifies bytes eight at a time in a uint64 ("SIMD within
// a register") for the scans of the call path: the JSON string escaper
// finds the bytes to escape, the injection detector the blocks that may be
// base64, the result renderer counts characters. It owns nothing but these
// helpers and must not grow state or I/O.
package swar

import "unicode/utf8"

// The scans build a mask of the bytes that matter without a branch per
// byte, then visit only those. Every function here is exact for each byte
// (no carry or borrow crosses into the next byte).

const (
	// Ones has the low bit of every byte set: c*Ones repeats byte c.
	Ones = 0x0101010101010101
	// High has the high bit of every byte set: x&High != 0 when a byte of
	// x is not ASCII.
	High = 0x8080808080808080
)

// Load64 reads s[i:i+8] little-endian (one load).
func Load64(s string, i int) uint64 {
	w := s[i : i+8]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// Eq sets the high bit of each byte of x equal to c.
func Eq(x uint64, c byte) uint64 {
	v := x ^ (uint64(c) * Ones) // zero where equal
	// v+0x7f.. has the high bit of each byte whose low 7 bits are not all
	// zero; or-ing v adds the bytes with the high bit set.
	return ^(((v &^ High) + 0x7f7f7f7f7f7f7f7f) | v) & High
}

// Gather moves the high bit of byte j of h (only high bits set) to
// bit j of the result.
func Gather(h uint64) uint64 { return (h >> 7) * 0x0102040810204080 >> 56 }

// RuneCount is utf8.RuneCountInString, eight bytes at a time where they
// are ASCII: it decodes from the same positions, so it counts the same
// (an invalid byte is one rune).
func RuneCount(s string) int {
	n, i := 0, 0
	for i+8 <= len(s) {
		if Load64(s, i)&High == 0 {
			i += 8
			n += 8
			continue
		}
		for end := i + 8; i < end; n++ {
			if s[i] < utf8.RuneSelf {
				i++
			} else {
				_, w := utf8.DecodeRuneInString(s[i:])
				i += w
			}
		}
	}
	return n + utf8.RuneCountInString(s[i:])
}
