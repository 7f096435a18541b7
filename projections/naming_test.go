package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// hash8 is the expected suffix, computed independently of naming.go.
func hash8(server, tool string) string {
	s := sha256.Sum256([]byte(server + "\x00" + tool))
	return hex.EncodeToString(s[:])[:8]
}

func TestToolName(t *testing.T) {
	long := strings.Repeat("t", 70)
	tests := []struct {
		name, server, tool, want string
	}{
		{"plain", "github", "create_issue", "mcp__github__create_issue"},
		{"dash kept", "my-server", "get-user", "mcp__my-server__get-user"},
		{"dots and spaces", "my.server", "get user", "mcp__my_server__get_user"},
		{"one underscore per rune", "café", "naïve→x", "mcp__caf___na_ve_x"},
		{"invalid utf-8 byte", "a\xffb", "t", "mcp__a_b__t"},
		{"slash and colon", "org/repo", "ns:tool", "mcp__org_repo__ns_tool"},
		{"range ends kept", "AZ", "az09_-", "mcp__AZ__az09_-"},
		{"range neighbours replaced", "@[", "/:`{", "mcp__" + strings.Repeat("_", 8)},
		{"exactly 64", "s", strings.Repeat("x", 64-len("mcp__s__")), "mcp__s__" + strings.Repeat("x", 64-len("mcp__s__"))},
		{"65 overflows", "s", strings.Repeat("x", 65-len("mcp__s__")),
			("mcp__s__" + strings.Repeat("x", 65))[:55] + "_" + hash8("s", strings.Repeat("x", 65-len("mcp__s__")))},
		{"long", "server", long, ("mcp__server__" + long)[:55] + "_" + hash8("server", long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToolName(tt.server, tt.tool)
			if got != tt.want {
				t.Errorf("ToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
			}
			if !validName.MatchString(got) {
				t.Errorf("%q is not a valid catalog name", got)
			}
			// Alone, ToolNames agrees with ToolName.
			if n := ToolNames([]ToolRef{{tt.server, tt.tool}})[ToolRef{tt.server, tt.tool}]; n != got {
				t.Errorf("ToolNames alone = %q, ToolName = %q", n, got)
			}
		})
	}
}

func TestToolNamesCollision(t *testing.T) {
	a, b, c := ToolRef{"a.b", "x"}, ToolRef{"a_b", "x"}, ToolRef{"other", "x"}
	names := ToolNames([]ToolRef{a, b, c, a}) // a twice: refs are a set
	if len(names) != 3 {
		t.Fatalf("got %d names, want 3: %v", len(names), names)
	}
	if want := "mcp__a_b__x_" + hash8("a.b", "x"); names[a] != want {
		t.Errorf("a = %q, want %q", names[a], want)
	}
	if want := "mcp__a_b__x_" + hash8("a_b", "x"); names[b] != want {
		t.Errorf("b = %q, want %q (both colliding refs are suffixed)", names[b], want)
	}
	if names[c] != "mcp__other__x" {
		t.Errorf("c = %q, want it unsuffixed", names[c])
	}
}

func TestToolNamesCollisionWithinServer(t *testing.T) {
	a, b := ToolRef{"s", "get.user"}, ToolRef{"s", "get user"}
	names := ToolNames([]ToolRef{a, b})
	if names[a] == names[b] || !strings.HasPrefix(names[a], "mcp__s__get_user_") || !strings.HasPrefix(names[b], "mcp__s__get_user_") {
		t.Errorf("names = %v", names)
	}
}

// A plain name that happens to equal another tool's suffixed name: both
// must move, and the result must still be unique.
func TestToolNamesSuffixMeetsPlain(t *testing.T) {
	long := ToolRef{"s", strings.Repeat("y", 70)}
	suffixedName := ToolName(long.Server, long.Tool)
	impostor := ToolRef{"s", strings.TrimPrefix(suffixedName, "mcp__s__")}
	if ToolName(impostor.Server, impostor.Tool) != suffixedName {
		t.Fatalf("test setup: impostor's plain name %q != %q", ToolName(impostor.Server, impostor.Tool), suffixedName)
	}
	names := ToolNames([]ToolRef{long, impostor})
	if names[long] == names[impostor] {
		t.Fatalf("collision survived: %v", names)
	}
	for r, n := range names {
		if !validName.MatchString(n) {
			t.Errorf("%v: invalid name %q", r, n)
		}
		if n == suffixedName {
			t.Errorf("%v kept the contested name %q", r, n)
		}
	}
	if want := "_" + hash8(impostor.Server, impostor.Tool); !strings.HasSuffix(names[impostor], want) {
		t.Errorf("impostor = %q, want suffix %q", names[impostor], want)
	}
}

// A name contested at every suffix length: each impostor's plain name is
// the long ref's name at the next suffix length, so the long ref climbs to
// 32 hex digits, where it stays (there is no longer suffix) and the last
// impostor moves instead.
func TestToolNamesContestedAtEverySuffixLength(t *testing.T) {
	long := ToolRef{"s", strings.Repeat("y", 70)}
	full := sha256.Sum256([]byte(long.Server + "\x00" + long.Tool))
	hash := hex.EncodeToString(full[:])
	plain := "mcp__s__" + long.Tool
	refs := []ToolRef{long}
	for _, n := range []int{8, 16, 32} {
		name := plain[:MaxToolNameLen-1-n] + "_" + hash[:n]
		refs = append(refs, ToolRef{"s", strings.TrimPrefix(name, "mcp__s__")})
	}
	names := ToolNames(refs)
	if got, want := names[long], plain[:31]+"_"+hash[:32]; got != want {
		t.Errorf("long ref named %q, want %q", got, want)
	}
	seen := map[string]bool{}
	for _, r := range refs[1:] {
		if got, want := names[r], "mcp__s__"+r.Tool[:47]+"_"+hash8(r.Server, r.Tool); got != want {
			t.Errorf("impostor %q named %q, want %q", r.Tool, got, want)
		}
	}
	for _, n := range names {
		if seen[n] || !validName.MatchString(n) {
			t.Errorf("name %q repeated or invalid: %v", n, names)
		}
		seen[n] = true
	}
}

// refsForProperty returns refs over a tiny alphabet, so many sanitize to
// the same name, plus some long ones.
func refsForProperty() []ToolRef {
	parts := []string{"a", "a.", "a_", "a-", "a ", "b", "é", "_"}
	var refs []ToolRef
	for _, s := range parts {
		for _, t := range parts {
			refs = append(refs, ToolRef{s, t}, ToolRef{s + strings.Repeat("s", 30), t + strings.Repeat("t", 30)})
		}
	}
	return refs
}

func TestToolNamesProperties(t *testing.T) {
	refs := refsForProperty()
	want := ToolNames(refs)
	if len(want) != len(refs) {
		t.Fatalf("got %d names for %d distinct refs", len(want), len(refs))
	}
	byName := map[string]ToolRef{}
	for _, r := range refs {
		n := want[r]
		if !validName.MatchString(n) {
			t.Errorf("%q: invalid name %q", r, n)
		}
		if other, dup := byName[n]; dup {
			t.Errorf("%q and %q both named %q", r, other, n)
		}
		byName[n] = r
	}
	// A ref whose plain name no other ref shares keeps ToolName.
	plainCount := map[string]int{}
	for _, r := range refs {
		plainCount[plainName(r.Server, r.Tool)]++
	}
	for _, r := range refs {
		if plainCount[plainName(r.Server, r.Tool)] == 1 && want[r] != ToolName(r.Server, r.Tool) {
			t.Errorf("%q: unique ref named %q, want ToolName %q", r, want[r], ToolName(r.Server, r.Tool))
		}
	}
	// Order does not matter.
	for seed := uint64(1); seed <= 20; seed++ {
		shuffled := append([]ToolRef(nil), refs...)
		shuffle(shuffled, seed)
		if got := ToolNames(shuffled); !maps.Equal(got, want) {
			t.Fatalf("seed %d: names depend on input order", seed)
		}
	}
}

func ExampleToolName() {
	fmt.Println(ToolName("github", "create_issue"))
	fmt.Println(ToolName("my.server", "get user"))
	// Output:
	// mcp__github__create_issue
	// mcp__my_server__get_user
}

// shuffle permutes xs in place with a fixed xorshift sequence from seed, so
// tests are reproducible without math/rand.
func shuffle[T any](xs []T, seed uint64) {
	x := seed | 1
	for i := len(xs) - 1; i > 0; i-- {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i+1))
		xs[i], xs[j] = xs[j], xs[i]
	}
}
