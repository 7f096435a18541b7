package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/runtime/internal/swar"
)

// Differential tests for the call path's JSON string escaper against the
// implementation it replaced (json_ref_test.go), and its SWAR byte
// classification against its byte-at-a-time meaning. The guard's scans
// have theirs in runtime/guard.

// TestJSONAttention: jsonAttention flags exactly the bytes a JSON string
// must escape or decode (controls, quote, backslash, non-ASCII), at every
// position among any neighbours.
func TestJSONAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	check := func(x uint64) {
		attn := jsonAttention(x)
		for j := range 8 {
			c := byte(x >> (8 * j))
			if want := c < 0x20 || c == '"' || c == '\\' || c >= 0x80; attn>>(8*j+7)&1 == 1 != want {
				t.Fatalf("jsonAttention(%#x) byte %d (%#x): %v", x, j, c, attn>>(8*j+7)&1)
			}
		}
	}
	for c := range 256 {
		for j := range 8 {
			for _, fill := range []uint64{0, ^uint64(0), 0x2222222222222222, 0x5c5c5c5c5c5c5c5c, r.Uint64(), r.Uint64()} {
				check(fill&^(0xff<<(8*j)) | uint64(c)<<(8*j))
			}
		}
	}
	for range 100000 {
		check(r.Uint64())
	}
}

// TestAppendJSONStringDifferential: the same bytes as the reference, on
// generated and real text; and valid JSON that decodes back.
func TestAppendJSONStringDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 52))
	check := func(s string) {
		got, want := appendJSONString([]byte("x"), s), refAppendJSONString([]byte("x"), s)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q):\n got %q\nwant %q", s, got, want)
		}
		if n, want := swar.RuneCount(s), utf8.RuneCountInString(s); n != want {
			t.Fatalf("swar.RuneCount(%q) = %d, want %d", s, n, want)
		}
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil || utf8.ValidString(s) && back != s {
			t.Fatalf("%q: round trip %q, %v", s, back, err)
		}
	}
	const alphabet = "ab \"\\\n\r\t\x00\x1f\x7f/<>&é中\u2028\U0001F600\xff\xc3\xe2\x80"
	for range 30000 {
		var sb strings.Builder
		for range r.IntN(80) {
			if r.IntN(3) == 0 {
				sb.WriteString(strings.Repeat("x", r.IntN(20)))
			}
			sb.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		check(sb.String())
	}
	files, _ := filepath.Glob(filepath.Join("guard", "testdata", "outputs", "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		check(string(b))
	}
}

// TestBlobOfOwned: the same blob as blobOf, its text sharing b only when
// it fits.
func TestBlobOfOwned(t *testing.T) {
	for _, n := range []int{0, 1, 99, 100, 101, 5000} {
		b := bytes.Repeat([]byte("a"), n)
		if got, want := blobOfOwned(slices.Clone(b), 100), blobOf(b, 100); got != want {
			t.Errorf("%d bytes: %+v, want %+v", n, got, want)
		}
	}
}

// TestBlobOf: a text that fits is kept whole with its size and no hash;
// a text past the cap keeps its first limit bytes, its size and the
// SHA-256 of the whole.
func TestBlobOf(t *testing.T) {
	whole := blobOf([]byte(`{"a":1}`), 100)
	if whole != (events.Blob{Text: `{"a":1}`, Size: 7}) {
		t.Errorf("whole: %+v", whole)
	}
	b := bytes.Repeat([]byte("xy"), 100)
	cut := blobOf(b, 101)
	sum := sha256.Sum256(b)
	if cut.Text != string(b[:101]) || cut.Size != 200 || !cut.Truncated || cut.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("cut: %+v", cut)
	}
}

// FuzzAppendJSONString: the escaper writes what the reference writes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\n", "é中\xff\u2028", strings.Repeat("x", 40) + "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, want := appendJSONString(nil, in), refAppendJSONString(nil, in)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendJSONString(%q) = %q, want %q", in, got, want)
		}
	})
}
