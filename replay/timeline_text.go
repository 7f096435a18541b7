package replay

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcpledger/mcpledger/events"
)

// ---- text: durations, joins, clipping and escaping ----

// tlCount says "1 call", "2 calls".
func tlCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// tlJoin joins the non-empty parts with sep ("-" when all are empty).
func tlJoin(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return tlOr(strings.Join(out, sep))
}

// tlDur formats a duration compactly: 840µs, 316ms, 1.02s, 2m05s, 1h02m.
func tlDur(ns int64) string {
	d := time.Duration(ns)
	if d < 0 {
		return "-" + tlDur(-ns)
	}
	if d == 0 {
		return "0s"
	}
	if d < time.Millisecond {
		return strconv.FormatInt(d.Microseconds(), 10) + "µs"
	}
	if d < time.Second-500*time.Microsecond { // from 999.5ms, three digits round to 1s
		return strconv.FormatFloat(float64(d)/1e6, 'g', 3, 64) + "ms"
	}
	if d < time.Minute {
		return strconv.FormatFloat(float64(d)/1e9, 'g', 3, 64) + "s"
	}
	if d < time.Hour && d%time.Minute < time.Second {
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	if d < time.Hour {
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	if d%time.Hour < time.Minute {
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func tlMs(ms int64) string { return tlDur(ms * int64(time.Millisecond)) }

func tlOr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tlHash abbreviates a config hash.
func tlHash(h string) string {
	if h == "" {
		return "-"
	}
	h = strings.TrimPrefix(h, "sha256:")
	return tlClip(h, 12)
}

// tlTail returns the last n lines, each clipped.
func tlTail(lines []string, n int) []string {
	lines = lines[max(len(lines)-n, 0):]
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = tlClip(l, 200)
	}
	return out
}

func tlBlob(b events.Blob) string {
	s := tlClip(b.Text, 240)
	s += fmt.Sprintf(" (%d B", b.Size)
	if b.Truncated {
		s += ", truncated"
	}
	return s + ")"
}

// tlClip shortens s to n runes, ending it with … when it was longer.
func tlClip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// tlANSI matches terminal escape sequences (colours in stderr).
var tlANSI = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])`)

// tlEsc escapes s for HTML and XML text and attributes, dropping what XML
// cannot hold (control characters other than tab and newline, invalid
// UTF-8), so the SVG stays well-formed whatever a server printed.
func tlEsc(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.Contains(s, "\x1b") {
		s = tlANSI.ReplaceAllString(s, "")
	}
	s = strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' {
			return c
		}
		if unicode.IsControl(c) || c == 0xFFFE || c == 0xFFFF {
			return -1
		}
		return c
	}, s)
	return html.EscapeString(s)
}
