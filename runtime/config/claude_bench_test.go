package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkLoadClaudeFile: what reading Claude Code's ~/.claude.json
// adds to a Load (each hot reload, and Claude Code rewrites the file on
// every start): a file of about 5 MiB (2,000 projects with their
// history, as a long-used one grows) against the same sources without
// it.
func BenchmarkLoadClaudeFile(b *testing.B) {
	root := b.TempDir()
	ws := filepath.Join(root, "ws")
	writeConfig(b, filepath.Join(ws, ".mcp.json"), servers(`"p": `+stdio("p")))
	var sb strings.Builder
	sb.WriteString("{\n  \"numStartups\": 1000,\n  \"projects\": {\n")
	for i := range 2000 {
		fmt.Fprintf(&sb, "    %q: {\n      \"allowedTools\": [],\n      \"history\": [\n", fmt.Sprintf("/home/u/p%d", i))
		for j := range 10 {
			fmt.Fprintf(&sb, "        {\"display\": \"prompt %d with some text that a user typed into the session, quoted \\\"like this\\\" {and braces}\", \"pastedContents\": {}},\n", j)
		}
		sb.WriteString("        {}\n      ]\n    },\n")
	}
	fmt.Fprintf(&sb, "    %q: {\"mcpServers\": {\"l\": {\"command\": \"l\"}}}\n  },\n  \"mcpServers\": {\"u\": {\"type\": \"http\", \"url\": \"https://u.example/mcp\"}}\n}\n", ws)
	claude := filepath.Join(root, ".claude.json")
	writeConfig(b, claude, sb.String())
	fi, _ := os.Stat(claude)
	for _, c := range []struct {
		name string
		src  Sources
		want int
	}{
		{"without", Sources{Workspace: ws}, 1},
		{fmt.Sprintf("with-%dKiB", fi.Size()>>10), Sources{Workspace: ws, ClaudeFile: claude}, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if lc := Load(c.src); len(lc.Observed.Servers) != c.want {
					b.Fatalf("%d servers, want %d: %v", len(lc.Observed.Servers), c.want, lc.Unusable)
				}
			}
		})
	}
}
