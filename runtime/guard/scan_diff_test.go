package guard

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpledger/mcpledger/runtime/internal/swar"
)

// Differential tests for the guard's fast scans against the
// implementations they replaced (redact_ref_test.go) and against their
// byte-at-a-time meaning.

// rounds is the number of random rounds of a differential test: full
// normally, short under -short (the mutation runs), where the targeted
// boundary tests do the rest.
func rounds(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// TestB64Mask: b64Mask flags exactly the base64 bytes, at every position
// among any neighbours.
func TestB64Mask(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	check := func(x uint64) {
		b64 := b64Mask(x)
		for j := range 8 {
			if b64>>(8*j+7)&1 == 1 != b64Table[byte(x>>(8*j))] {
				t.Fatalf("b64Mask(%#x) = %#x", x, b64)
			}
		}
	}
	for c := range 256 {
		for j := range 8 {
			for _, fill := range []uint64{0, ^uint64(0), 0x2222222222222222, 0x3030303030303030, r.Uint64(), r.Uint64()} {
				check(fill&^(0xff<<(8*j)) | uint64(c)<<(8*j))
			}
		}
	}
	for range rounds(100000, 10000) {
		check(r.Uint64())
		// Mostly base64 bytes.
		x := uint64(0x6161616161616161) &^ (0xff << (8 * r.IntN(8)))
		check(x | uint64(r.IntN(256))<<(8*r.IntN(8)))
	}
}

// checkMasks checks detectMask and redactMask against the byte pairs of
// s.
func checkMasks(t *testing.T, s string) {
	b := []byte(s)
	for base := 0; base < len(s); base += 64 {
		dm, maybeB64 := detectMask(s, base)
		rm := redactMask(b, base)
		for q := range 8 {
			at, want := base+8*q, true
			for j := at; j < at+8; j++ {
				want = want && j < len(s) && s[j] >= '+' && s[j] <= 'z'
			}
			if maybeB64>>q&1 == 1 != want {
				t.Fatalf("%q at %d: detectMask's block bit %v", s, at, maybeB64>>q&1)
			}
		}
		for j := 0; j < 64; j++ {
			i := base + j
			wantDM, wantRM := false, false
			if i+1 < len(s) {
				wantDM = isSpecial[s[i]] || next1[s[i]]&next2[s[i+1]] != 0
				cls := redactClass[s[i]]
				wantRM = cls != clsNone && redactSecond[s[i+1]]&(1<<cls) != 0
			}
			if dm>>j&1 == 1 != wantDM || rm>>j&1 == 1 != wantRM {
				t.Fatalf("%q at %d: detectMask %v, redactMask %v", s, i, dm>>j&1, rm>>j&1)
			}
		}
	}
}

// redactFragments: JSON with secret and plain keys (raw and escaped),
// every credential format and near misses, secrets, separators.
var redactFragments = []string{
	`{"password":"hunter2!"}`, `"api_key": "abc"`, `"apiKey":"def"`, `"x-api-key" : "ghi"`, `"Authorization":"Basic Zm9v"`,
	`"client_secret":"s1"`, `"access_token":"at"`, `"Cookie":"sid=1"`, `"max_tokens":100`, `"token_count":"12"`,
	`"token_type":"bearer"`, `"password_url":"x"`, `"token":null`, `"secret":true`, `"password":"a\"b"`, `"password":""`,
	`{\"token\":\"t0k3n\",\"n\":1}`, `\"secret\" : \"v\\\\w\"`, `\"to_ken\":\"x\"`, `"to.ken":"y"`, `"PASS-PHRASE":"z"`,
	`"sessionKey":"k"`, `"signature":"s"`, `"status":"ok"`, `"text":"`, `"`, `\"`, `\\`, `:`, ` : `, `,`, `{`, `}`,
	"Bearer ", "bearer  ", "BEARER ", "Authorization: Bearer abc.DEF-123_xyz", "Bearer authentication", "abc.123-xyz",
	"ghp_", "gho_", "ghx_", "github_pat_", "0123456789abcdefghij", "ABCDEFGHIJ012345", "sk-", "sk-proj-", "task-", "xoxb-",
	"xoxz-", "AKIA", "ASIA", "IOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "eyJ", "eyJhbGciOiJIUzI1NiJ9", ".", "eyJzdWIiOiIx",
	"dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "resolved-secret-1", "tok-1234567890abcdef", `p<w&"rd-123`,
	`p\u003cw\u0026\"rd-123`, " ", "\n", "\t", "-", "_", "é", "\xff", "aaaa", "s", "g", "x", "A", "e", "B", "b",
	// Nested strings (JSON in a string in a string) and JSON escapes
	// before a credential.
	`\\\"password\\\":\\\"x\\\\\\\"y\\\"`, `{\\\"data\\\":{\\\"token\\\":\\\"t1\\\"}}`, `\\\"`, `\\\\`, `\\\\\\\"`,
	`\n`, `\t`, `\r`, `\u001b`, `\u0061`, `\\n`,
	"://", "postgres://", "admin:", "S3cret:Pass@db", "https://oauth2:tok@host", "@", "ssh://git@h:22",
	"DB_PASSWORD=", "=", "==", ": ", "password: ", "?api_key=", "&", "'", "export TOKEN=", "Authorization: Bearer ", `=\"`,
	" = ", "aws_secret_access_key = ", "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN CERTIFICATE-----", "-----END ", "-----",
	"Cookie: ", "Set-Cookie: ", "a=1; sid=v", "X-Cookie-Count: ",
}

func genRedactInput(r *rand.Rand) string {
	frags := redactFragments
	if r.IntN(2) == 0 {
		frags = make([]string, 5)
		for i := range frags {
			frags[i] = redactFragments[r.IntN(len(redactFragments))]
		}
	}
	var sb strings.Builder
	for range r.IntN(40) {
		switch p := r.IntN(10); {
		case p < 7:
			sb.WriteString(frags[r.IntN(len(frags))])
		case p < 9:
			for range 1 + r.IntN(30) {
				sb.WriteByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"[r.IntN(64)])
			}
		default:
			sb.WriteByte(byte(r.IntN(256)))
		}
	}
	return sb.String()
}

var diffRedactor = NewRedactor([]string{"resolved-secret-1", "tok-1234567890abcdef", `p<w&"rd-123`, "Bearer zzz-999", "zzz-999", "aaaaaa"})

func checkRedact(t *testing.T, in string) {
	got, want := diffRedactor.Redact([]byte(in)), refRedact(diffRedactor, []byte(in))
	if !bytes.Equal(got, want) {
		t.Fatalf("redact(%q):\n got %q\nwant %q", in, got, want)
	}
	checkMasks(t, in)
}

// TestRedactDifferential compares the Redactor with the reference on
// generated inputs, on the 1 MiB input of BenchmarkRedact and on the
// real outputs of testdata/outputs with fragments spliced in.
func TestRedactDifferential(t *testing.T) {
	n := rounds(30000, 300)
	r := rand.New(rand.NewPCG(6, 51))
	changed := 0
	for range n {
		in := genRedactInput(r)
		checkRedact(t, in)
		if !bytes.Equal(diffRedactor.Redact([]byte(in)), []byte(in)) {
			changed++
		}
	}
	if changed < n/10 || changed > n*9/10 {
		t.Errorf("%d of %d generated inputs redacted", changed, n)
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "outputs", "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for k := range rounds(20, 2) {
			m := string(b)
			for range k {
				at := r.IntN(len(m) + 1)
				m = m[:at] + redactFragments[r.IntN(len(redactFragments))] + m[at:]
			}
			checkRedact(t, m)
			checkRedact(t, jsonString(m))
		}
	}
}

// TestContainsFrom: the anchored search agrees with bytes.Contains,
// including when the anchor byte is common and it hands over.
func TestContainsFrom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range rounds(20000, 2000) {
		alpha := "ab-"[:1+r.IntN(3)]
		gen := func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = alpha[r.IntN(len(alpha))]
			}
			return b
		}
		s := gen(1 + r.IntN(8))
		b := gen(r.IntN(600))
		if r.IntN(3) == 0 {
			at := r.IntN(len(b) + 1)
			b = slices.Concat(b[:at], s, b[at:])
		}
		for _, at := range []int{0, len(s) - 1, anchorOf(s)} {
			if got, want := containsFrom(b, s, at), bytes.Contains(b, s); got != want {
				t.Fatalf("containsFrom(%q, %q, %d) = %v", b, s, at, got)
			}
		}
	}
}

// TestContainsFromEdges: a secret as long as the text, at its very end,
// and a text one byte shorter than the secret.
func TestContainsFromEdges(t *testing.T) {
	s := []byte("tok-1234")
	for _, tc := range []struct {
		b    string
		want bool
	}{
		{"tok-1234", true}, {"xx tok-1234", true}, {"tok-123", false}, {"ok-1234", false}, {"", false},
	} {
		for at := range s {
			if got := containsFrom([]byte(tc.b), s, at); got != tc.want {
				t.Errorf("containsFrom(%q, %q, %d) = %v", tc.b, s, at, got)
			}
		}
	}
}

// TestAnchorOf: the anchor is the last of the rarest bytes of a secret
// (byteRarity), the one containsFrom looks for: no byte is rarer, and
// none after it as rare.
func TestAnchorOf(t *testing.T) {
	for s, want := range map[string]int{"abQcdQe": 5, "tok-1234": 2, "é-ok": 1, "aaaaaa": 5, "Bearer zzz-999": 9} {
		if got := anchorOf([]byte(s)); got != want {
			t.Errorf("anchorOf(%q) = %d, want %d", s, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 5))
	const alphabet = "aeQZ09-_\xc3\xa9\x00 $"
	for range rounds(2000, 200) {
		s := make([]byte, 1+r.IntN(12))
		for i := range s {
			s[i] = alphabet[r.IntN(len(alphabet))]
		}
		at := anchorOf(s)
		for i, c := range s {
			if byteRarity[c] < byteRarity[s[at]] || i > at && byteRarity[c] == byteRarity[s[at]] {
				t.Fatalf("anchorOf(%q) = %d, but byte %d is as rare or rarer", s, at, i)
			}
		}
	}
}

// TestRenderOneTextBlock: the one-block fast path renders as the general
// path does.
func TestRenderOneTextBlock(t *testing.T) {
	for _, text := range []string{"", "plain", "é中\xff", strings.Repeat("abcdefghé", 100)} {
		for _, max := range []int{0, -1, 5, 100, len(text), len(text) - 1, 10000} {
			res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
			got := RenderResult(res, max)
			r := renderer{max: max}
			r.add(text)
			if want := r.done(); got != want {
				t.Errorf("RenderResult(%q, %d) = %+v, want %+v", text, max, got, want)
			}
		}
	}
}

// TestSecretKeyNameDifferential: the key check (a letter prefilter, then
// the words by their first two bytes) agrees with the reference's 14
// bytes.Contains on keys built from the words, separators and case.
func TestSecretKeyNameDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 53))
	parts := append(append([]string{"x", "api", "key", "my", "to", "ken", "pass", "data", "_", "-", ".", "$", "@", "9"},
		secretKeyWords...), secretKeyNotWords...)
	for range rounds(50000, 5000) {
		var k []byte
		for range 1 + r.IntN(5) {
			p := parts[r.IntN(len(parts))]
			for i := range len(p) {
				c := p[i]
				if r.IntN(4) == 0 && c >= 'a' && c <= 'z' {
					c -= 'a' - 'A'
				}
				k = append(k, c)
				if r.IntN(12) == 0 {
					k = append(k, "_-."[r.IntN(3)])
				}
			}
		}
		if len(k) > 63 {
			k = k[:63]
		}
		if got, want := secretKeyName(k), refSecretKeyName(k); got != want {
			t.Fatalf("secretKeyName(%q) = %v, reference %v", k, got, want)
		}
	}
}

// jsonString is s as a JSON string, as a server escapes its text.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func FuzzRedactDifferential(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 3))
	for range 32 {
		f.Add(genRedactInput(r))
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkRedact(t, in)
		if swar.RuneCount(in) != utf8.RuneCountInString(in) {
			t.Fatalf("swar.RuneCount(%q)", in)
		}
	})
}
