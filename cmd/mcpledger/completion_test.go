package main

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCompletionScripts: completion bash|zsh|fish|powershell prints a
// script that asks the binary (__complete) what to complete; another
// shell is a usage error.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runCLI(t, "completion", sh)
		if r.err != nil || !strings.Contains(r.stdout, "__complete") || !strings.Contains(r.stdout, "mcpledger") {
			t.Errorf("completion %s: %v\n%.300s", sh, r.err, r.stdout)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}} {
		if r := runCLI(t, args...); codeOf(r.err) != 2 || !strings.Contains(r.err.Error(), "bash, zsh, fish") {
			t.Errorf("%q: %v (exit %d), want exit 2 naming the shells", args, r.err, codeOf(r.err))
		}
	}
}

// completions is what `mcpledger __complete ARGS...` offers: the
// candidates, without their descriptions.
func completions(t *testing.T, args ...string) []string {
	t.Helper()
	r := runCLI(t, append([]string{"__complete"}, args...)...)
	if r.err != nil {
		t.Fatalf("__complete %q: %v", args, r.err)
	}
	var out []string
	for l := range strings.Lines(r.stdout) {
		if word, _, _ := strings.Cut(strings.TrimSuffix(l, "\n"), "\t"); !strings.HasPrefix(word, ":") {
			out = append(out, word)
		}
	}
	return out
}

// tableNames is the names of the command table that start with prefix,
// sorted (as cobra lists them).
func tableNames(prefix string) []string {
	var names []string
	for _, c := range commands {
		if strings.HasPrefix(c.name, prefix) {
			names = append(names, c.name)
		}
	}
	slices.Sort(names)
	return names
}

// TestCompleteCommandsAndFlags: commands complete by prefix, and after a
// command its own flags, which its Run declares (describeCommand).
func TestCompleteCommandsAndFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"st"}, tableNames("st")},
		{[]string{"re"}, tableNames("re")},
		{[]string{"replay", "--u"}, []string{"--until"}},
		{[]string{"replay", "last", "--v"}, []string{"--verify"}},
		{[]string{"--journal", "j.db", "log", "--f"}, []string{"--follow", "--from"}},
		{[]string{"serve", "--mcp"}, []string{"--mcp-config"}},
		{[]string{"help", "t"}, []string{"tools", "trust", "timeline"}},
		{[]string{"help", "tools", ""}, nil},
		{[]string{"completion", ""}, []string{"bash", "fish", "powershell", "zsh"}},
	} {
		if got := completions(t, c.args...); !slices.Equal(got, c.want) {
			t.Errorf("__complete %q = %q, want %q", c.args, got, c.want)
		}
	}
	// Every command completes its --journal and --help.
	for _, cmd := range commands {
		if got := completions(t, cmd.name, "--"); !slices.Contains(got, "--journal") || !slices.Contains(got, "--help") {
			t.Errorf("__complete %s -- = %q, want --journal and --help among them", cmd.name, got)
		}
	}
}

// TestBashCompletion sources the bash script in bash and completes as a
// shell would, against the built binary. bash-completion's
// _get_comp_words_by_ref is stood in for when it is not installed.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := buildCLI(t)
	script := `
declare -F _get_comp_words_by_ref >/dev/null || _get_comp_words_by_ref() {
	cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
	words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
}
source <(mcpledger completion bash)
complete_line() {
	COMP_LINE=$1; COMP_POINT=${#COMP_LINE}; read -ra COMP_WORDS <<<"$COMP_LINE"
	[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
	__start_mcpledger
	echo "$1|${COMPREPLY[*]}"
}
complete_line "mcpledger sta"
complete_line "mcpledger timeline last --wi"
complete_line "mcpledger --journal j.db replay --ver"
`
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = append(cmd.Environ(), "PATH="+filepath.Dir(bin)+":/usr/bin:/bin")
	out, err := cmd.Output() // stderr: bash's compopt outside a real completion
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "mcpledger sta|status\n" +
		"mcpledger timeline last --wi|--width\n" +
		"mcpledger --journal j.db replay --ver|--verify\n"
	if string(out) != want {
		t.Errorf("bash completed:\n%s\nwant:\n%s", out, want)
	}
}

// TestCompleteArguments: after a command, what its positional argument
// is: "last" for a SESSION, directories for trust, files for import and
// after a flag that takes a value, nothing for a command that takes no
// argument or whose argument is given (the shell would offer files).
func TestCompleteArguments(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want      string // the candidates, then the directive
		directive string
	}{
		{[]string{"status", ""}, "", ":4"},
		{[]string{"replay", ""}, "last", ":4"},
		{[]string{"replay", "--until", "5", "l"}, "last", ":4"},
		{[]string{"replay", "last", ""}, "", ":4"},
		{[]string{"replay", "x"}, "", ":4"},
		{[]string{"timeline", "last", "-o", ""}, "", ":0"},
		{[]string{"timeline", "--journal", ""}, "", ":0"},
		{[]string{"timeline", "--journal=j.db", ""}, "last", ":4"},
		{[]string{"trust", ""}, "", ":16"},
		{[]string{"import", ""}, "", ":0"},
		{[]string{"call", ""}, "", ":4"},
	} {
		r := runCLI(t, append([]string{"__completeNoDesc"}, c.args...)...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		got, directive := strings.Join(lines[:len(lines)-1], " "), lines[len(lines)-1]
		if r.err != nil || got != c.want || directive != c.directive {
			t.Errorf("__complete %q = %q %s (%v), want %q %s", c.args, got, directive, r.err, c.want, c.directive)
		}
	}
}
