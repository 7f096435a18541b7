package replay_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/replay"
)

// TestTimelineSelfContained fails on anything that would make the page
// load something: external scripts, styles, fonts, images or frames, and
// any URL outside text.
func TestTimelineSelfContained(t *testing.T) {
	for name, page := range map[string][]byte{
		"synthetic": tlRender(t, tlSynthetic(t), &replay.TimelineOptions{Source: "/var/lib/journal.db"}),
		"large":     tlRender(t, tlLarge(t), nil),
	} {
		tlCheckSelfContained(t, name, page)
	}
}

func tlCheckSelfContained(t *testing.T, name string, page []byte) {
	t.Helper()
	for _, bad := range []string{"<link", "<script src", "<img", "<iframe", "<object", "<embed", "<base", "@import", "url(", "@font-face", "xlink:href"} {
		if bytes.Contains(bytes.ToLower(page), []byte(bad)) {
			t.Errorf("%s: the page contains %q", name, bad)
		}
	}
	d := xml.NewDecoder(bytes.NewReader(page))
	var stack []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: not well-formed: %v", name, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
			for _, a := range tok.Attr {
				switch strings.ToLower(a.Name.Local) {
				case "src", "href", "srcset", "action", "poster", "data", "background":
					t.Errorf("%s: <%s %s=%q>", name, tok.Name.Local, a.Name.Local, a.Value)
				case "title":
					// text shown on hover: may quote a URL
				default:
					if strings.Contains(a.Value, "//") && strings.Contains(a.Value, ":") {
						t.Errorf("%s: <%s %s=%q> holds a URL", name, tok.Name.Local, a.Name.Local, a.Value)
					}
				}
			}
			if tok.Name.Local == "script" && len(tok.Attr) > 0 {
				t.Errorf("%s: <script> with attributes %v", name, tok.Attr)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 && (stack[len(stack)-1] == "style" || stack[len(stack)-1] == "script") &&
				(bytes.Contains(tok, []byte("http:")) || bytes.Contains(tok, []byte("https:"))) {
				t.Errorf("%s: a URL in <%s>", name, stack[len(stack)-1])
			}
		}
	}
}

// TestTimelineWellFormed parses the whole page, and each SVG on its own,
// as XML: a stray '<' or '&' from a server's stderr or a tool name would
// break the chart.
func TestTimelineWellFormed(t *testing.T) {
	evs := tlSynthetic(t)
	// A hostile server name and error text.
	evil := "<script>alert(1)</script>&amp;\x00\x07\ufffe"
	b := newTLBuilder(t, &events.SessionStarted{Seed: 1})
	b.at(time.Millisecond).in("", &events.ConfigObserved{Trigger: "start", Trusted: true, Servers: []events.ServerConfig{
		{Name: evil, Transport: events.TransportStdio, Command: evil, Hash: "h"}}})
	b.up(evil, 7, events.Tool{Name: evil})
	b.after(time.Second).in(evil, &events.ProcessExited{Attempt: 1, PID: 7, ExitCode: 1, StderrTail: []string{evil, "\xff\xfe invalid utf-8"}})
	for name, page := range map[string][]byte{
		"synthetic": tlRender(t, evs, nil),
		"hostile":   tlRender(t, b.evs, nil),
		"empty":     tlRender(t, nil, nil),
		"one event": tlRender(t, evs[:1], nil),
		"wide":      tlRender(t, evs, &replay.TimelineOptions{Width: 6000}),
	} {
		if err := tlDecodeAll(page); err != nil {
			t.Errorf("%s: the page is not well-formed XML: %v", name, err)
		}
		svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAll(page, -1)
		if len(svgs) < 2 {
			t.Errorf("%s: %d SVG elements, want the legend's, the labels' and the chart's", name, len(svgs))
		}
		for _, svg := range svgs {
			if err := tlDecodeAll(svg); err != nil {
				t.Errorf("%s: an SVG is not well-formed: %v\n%.200s", name, err, svg)
			}
		}
		if bytes.Contains(page, []byte("<script>alert")) {
			t.Errorf("%s: a server name reached the page unescaped", name)
		}
	}
}

func tlDecodeAll(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestTimelineChromium renders the synthetic and the large session in
// headless Chromium and checks the screenshots are not blank. Set
// MCPLEDGER_TIMELINE_SHOTS=DIR to keep the HTML and PNG files.
func TestTimelineChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no browser")
	}
	var browser string
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no /usr/bin/chromium or /usr/bin/chromium-browser: the timeline is not rendered in a browser (Debian: apt-get install -y chromium)")
	}
	dir := os.Getenv("MCPLEDGER_TIMELINE_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, evs := range map[string][]events.Event{"synthetic": tlSynthetic(t), "large": tlLarge(t)} {
		html := filepath.Join(dir, "timeline-"+name+".html")
		if err := os.WriteFile(html, tlRender(t, evs, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(dir, "timeline-"+name+".png")
		abs, err := filepath.Abs(html)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
			"--user-data-dir="+t.TempDir(), "--screenshot="+shot, "--window-size=1400,900", "file://"+abs)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: chromium: %v\n%s", name, err, out)
		}
		f, err := os.Open(shot)
		if err != nil {
			t.Fatalf("%s: no screenshot: %v\n%s", name, err, out)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 900 {
			t.Errorf("%s: screenshot is %dx%d, want 1400x900", name, b.Dx(), b.Dy())
		}
		if n := tlColors(img); n < 12 {
			t.Errorf("%s: the screenshot has %d colours: blank or nearly", name, n)
		}
		t.Logf("%s: %s", name, shot)
	}
}

// tlColors counts the distinct colours of img, up to 1,000.
func tlColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r >> 8, g >> 8, bl >> 8, a >> 8}] = true
			if len(seen) >= 1000 {
				return len(seen)
			}
		}
	}
	return len(seen)
}
