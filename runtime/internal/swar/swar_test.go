package swar

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestEqGather: Eq flags exactly the bytes equal to c, and Gather moves
// those flags to one bit per byte, at every position among any
// neighbours (a carry or borrow across bytes would show here).
func TestEqGather(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	check := func(x uint64, c byte) {
		eq := Eq(x, c)
		g := Gather(eq)
		for j := range 8 {
			b := byte(x >> (8 * j))
			if eq>>(8*j+7)&1 == 1 != (b == c) || eq>>(8*j)&0x7f != 0 {
				t.Fatalf("Eq(%#x, %#x) = %#x: byte %d", x, c, eq, j)
			}
			if g>>j&1 == 1 != (b == c) {
				t.Fatalf("Gather(Eq(%#x, %#x)) = %08b", x, c, g)
			}
		}
		if g>>8 != 0 {
			t.Fatalf("Gather(%#x) = %#x: bits past the eighth", eq, g)
		}
	}
	for _, c := range []byte{0, '"', '\\', 0x7f, 0x80, 0xff} {
		for v := range 256 {
			for j := range 8 {
				for _, fill := range []uint64{0, ^uint64(0), uint64(c) * Ones, r.Uint64()} {
					check(fill&^(0xff<<(8*j))|uint64(v)<<(8*j), c)
				}
			}
		}
	}
	for range 20000 {
		check(r.Uint64(), byte(r.IntN(256)))
	}
}

func TestLoad64(t *testing.T) {
	if got, want := Load64("xabcdefghy", 1), uint64(0x6867666564636261); got != want {
		t.Errorf("Load64 = %#x, want %#x (little-endian from index 1)", got, want)
	}
}

// TestRuneCount agrees with utf8.RuneCountInString, across the eight-byte
// boundaries and on invalid UTF-8.
func TestRuneCount(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 52))
	const alphabet = "ab\x00\x7fé中\U0001F600\xff\xc3\xe2\x80"
	for range 30000 {
		var sb strings.Builder
		for range r.IntN(40) {
			if r.IntN(3) == 0 {
				sb.WriteString(strings.Repeat("x", r.IntN(20)))
			}
			sb.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		s := sb.String()
		if got, want := RuneCount(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("RuneCount(%q) = %d, want %d", s, got, want)
		}
	}
}
