package replay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpledger/mcpledger/events"
	"github.com/mcpledger/mcpledger/fsm"
)

// ---- the page: header, legend, summary table, CSS and script ----

func (r *tlRender) page(o *TimelineOptions) {
	m := r.m
	r.w("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	r.w("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	r.w("<title>mcpledger timeline · %s</title>\n<style>%s</style>\n</head>\n<body>\n", tlEsc(tlOr(m.id)), tlCSS)
	r.header()
	r.legend()
	r.w("<div class=\"chart\">\n<div class=\"labels\">\n")
	r.labels()
	r.w("</div>\n<div class=\"scroll\">\n")
	r.chart()
	r.w("</div>\n</div>\n<p class=\"hint\">Hover over a band, mark or call for its details; click to pin them, click elsewhere to unpin.</p>\n")
	r.summary()
	if o.Source != "" {
		r.w("<p class=\"foot\">Read from %s.</p>\n", tlEsc(o.Source))
	}
	r.w("<div id=\"detail\" hidden=\"hidden\"></div>\n<script>%s</script>\n</body>\n</html>\n", tlJS)
}

func (r *tlRender) header() {
	m := r.m
	r.w("<header>\n<h1>mcpledger timeline</h1>\n<div class=\"sub\">session %s</div>\n<dl class=\"meta\">\n", tlEsc(tlOr(m.id)))
	item := func(k, v string) {
		r.w("<div><dt>%s</dt><dd title=\"%s\">%s</dd></div>\n", tlEsc(k), tlEsc(v), tlEsc(v))
	}
	utc := func(t int64) string { return time.Unix(0, t).UTC().Format("2006-01-02 15:04:05.000 UTC") }
	item("started", utc(m.start))
	end := "not recorded: interrupted, or still running"
	if m.stopped != nil {
		end = fmt.Sprintf("%s · %s", time.Unix(0, m.stoppedAt).UTC().Format("15:04:05.000"), m.stopped.Reason)
	}
	item("ended", end)
	item("duration", tlDur(m.end-m.start))
	if s := m.started; s != nil {
		item("command", tlOr(s.Command))
		item("build", tlJoin(" · ", s.Version, s.Build))
		item("seed", strconv.FormatUint(s.Seed, 10))
		if s.Host != "" || s.PID != 0 {
			pid := ""
			if s.PID != 0 {
				pid = "pid " + strconv.Itoa(s.PID)
			}
			item("host", tlJoin(" · ", s.Host, pid))
		}
		o := fsm.WithDefaults(s.Options)
		item("retries", fmt.Sprintf("%d launches, backoff %s doubling to %s", o.MaxAttempts, tlMs(o.BackoffBaseMs), tlMs(o.BackoffMaxMs)))
		if s.Previous != "" {
			item("previous", s.Previous)
		}
	}
	item("recorded", tlJoin(" · ", tlCount(m.events, "event"), tlCount(len(m.lanes), "server"), tlCount(m.calls, "call")))
	r.w("</dl>\n</header>\n")
}

func (r *tlRender) legend() {
	r.w("<div class=\"legend\">\n")
	sw := func(label string, draw func()) {
		r.w("<span><svg width=\"22\" height=\"16\" viewBox=\"0 0 22 16\">")
		draw()
		r.w("</svg>%s</span>\n", tlEsc(label))
	}
	for _, s := range events.States() {
		sw(string(s), func() { r.w(`<rect x="1" y="3" width="20" height="10" rx="2" fill="%s"/>`, tlStateColor[s]) })
	}
	r.w("<i></i>\n")
	sw("failure", func() { r.glyph(tlMkFail, 11, 8, "") })
	sw("gave up", func() { r.glyph(tlMkGaveUp, 11, 8, "") })
	sw("retry attempt", func() { r.glyph(tlMkAttempt, 11, 8, "2") })
	sw("backoff timer", func() {
		r.w(`<path d="M2 5v6M2 8H17" stroke="#b45309" stroke-width="1.5" fill="none"/><circle cx="18" cy="8" r="2.5" fill="#b45309"/>`)
	})
	sw("process", func() {
		r.w(`<rect x="2" y="7" width="16" height="3" fill="#475569"/><circle cx="19" cy="8.5" r="2.5" fill="#dc2626"/>`)
	})
	sw("approval asked", func() { r.glyph(tlMkApprovalAsked, 11, 8, "") })
	sw("approved", func() { r.glyph(tlMkApproved, 11, 8, "") })
	sw("rejected", func() { r.glyph(tlMkRejected, 11, 8, "") })
	sw("tools changed", func() { r.glyph(tlMkToolsChanged, 11, 8, "") })
	sw("ping failed", func() { r.glyph(tlMkPing, 11, 8, "") })
	sw("needs sign-in", func() { r.glyph(tlMkAuthBlocked, 11, 8, "") })
	sw("signed in", func() { r.glyph(tlMkAuth, 11, 8, "in") })
	sw("token refreshed", func() { r.glyph(tlMkAuth, 11, 8, "refresh") })
	sw("sign-in failed", func() { r.glyph(tlMkAuth, 11, 8, "fail") })
	sw("signed out", func() { r.glyph(tlMkAuth, 11, 8, "out") })
	sw("merged: too short to draw apart", func() {
		r.w(`<rect x="1" y="3" width="20" height="10" fill="%s"/><path d="M1 12H21" class="churn"/>`, tlStateColor[events.StateReady])
	})
	sw("reload", func() { r.w(`<path d="M11 0V16" stroke="#7c3aed" stroke-width="1.5" stroke-dasharray="3 2"/>`) })
	r.w("<i></i>\n")
	for _, o := range append(append([]string{events.OutcomeOK}, tlCallsFailed...), events.OutcomeCancelled, tlUnfinished) {
		sw(strings.ReplaceAll(o, "_", " "), func() { r.w(`<rect x="3" y="4" width="16" height="8" rx="1.5" fill="%s"/>`, tlOutcomeColor[o]) })
	}
	sw("injection signals", func() {
		r.w(`<rect x="3" y="4" width="16" height="8" rx="1.5" fill="%s" stroke="#c026d3" stroke-width="2"/>`, tlOutcomeColor[events.OutcomeOK])
	})
	sw("call denied", func() { r.glyph(tlMkDenied, 11, 8, "") })
	sw("calls, aggregated", func() {
		r.w(`<rect x="3" y="9" width="4" height="5" fill="#16a34a"/><rect x="8" y="4" width="4" height="10" fill="#16a34a"/><rect x="8" y="2" width="4" height="2" fill="#dc2626"/><rect x="13" y="7" width="4" height="7" fill="#16a34a"/>`)
	})
	r.w("</div>\n")
}

func (r *tlRender) summary() {
	r.w("<h2>Servers</h2>\n<table>\n<thead><tr><th>server</th><th>transport</th><th class=\"n\">launches</th><th class=\"n\">failures</th>" +
		"<th class=\"n\">ready</th><th class=\"n\">calls ok</th><th class=\"n\">calls failed</th><th>final state</th><th>last error</th></tr></thead>\n<tbody>\n")
	for _, l := range r.m.lanes {
		transport := "-"
		if l.cfg != nil {
			transport = string(l.cfg.Transport)
		}
		var ready int64
		for _, s := range l.segs {
			if s.state == events.StateReady {
				ready += s.to - s.from
			}
		}
		last, before := l.final()
		readyText := "-"
		if lived := r.m.end - l.first; lived > 0 && ready > 0 {
			readyText = fmt.Sprintf("%s (%.0f%%)", tlDur(ready), 100*float64(ready)/float64(lived))
		}
		bad := 0
		var extra []string
		for _, o := range append(slices.Clone(tlCallsFailed), events.OutcomeCancelled, tlUnfinished) {
			if n := l.outcomes[o]; n > 0 {
				extra = append(extra, fmt.Sprintf("%d %s", n, strings.ReplaceAll(o, "_", " ")))
				if slices.Contains(tlCallsFailed, o) {
					bad += n
				}
			}
		}
		badText := strconv.Itoa(bad)
		if len(extra) > 0 {
			for i := range extra {
				extra[i] = "<span>" + tlEsc(extra[i]) + "</span>"
			}
			badText += "<div class=\"brk\">" + strings.Join(extra, " · ") + "</div>"
		}
		state := "-"
		if last.state != "" {
			state = fmt.Sprintf("<span class=\"pill\" style=\"background:%s\">%s</span>", tlStateColor[last.state], tlEsc(string(last.state)))
			if last.reason != "" {
				state += " <span class=\"muted\">" + tlEsc(string(last.reason)) + "</span>"
			}
			if before != "" {
				state += fmt.Sprintf(" <span class=\"muted\">(was</span> <span class=\"pill\" style=\"background:%s\">%s</span><span class=\"muted\">)</span>",
					tlStateColor[before], tlEsc(string(before)))
			}
		}
		r.w("<tr><td class=\"srv\">%s</td><td>%s</td><td class=\"n\">%d</td><td class=\"n%s\">%d</td><td class=\"n\">%s</td><td class=\"n\">%d</td><td class=\"n%s\">%s</td><td class=\"st\">%s</td><td class=\"err\" title=\"%s\">%s</td></tr>\n",
			tlEsc(l.name), tlEsc(transport), l.launches, tlHot(l.failures), l.failures, tlEsc(readyText), l.outcomes[events.OutcomeOK],
			tlHot(bad), badText, state, tlEsc(l.lastError), tlEsc(tlClip(l.lastError, 90)))
	}
	if len(r.m.lanes) == 0 {
		r.w("<tr><td colspan=\"9\" class=\"muted\">No server appears in this session.</td></tr>\n")
	}
	r.w("</tbody>\n</table>\n")
}

func tlHot(n int) string {
	if n > 0 {
		return " hot"
	}
	return ""
}

const tlCSS = `
:root{--fg:#0f172a;--muted:#64748b;--line:#e2e8f0}
*{box-sizing:border-box}
body{margin:0;padding:20px 24px 48px;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue","DejaVu Sans",Arial,sans-serif;color:var(--fg);background:#f1f5f9}
h1{font-size:20px;margin:0}
h2{font-size:15px;margin:22px 0 8px}
.sub{color:var(--muted);font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(400px,1fr));gap:3px 28px;margin:12px 0;padding:10px 16px;background:#fff;border:1px solid var(--line);border-radius:8px}
.meta div{display:flex;gap:10px;min-width:0}
.meta dt{color:var(--muted);flex:none;width:70px}
.meta dd{margin:0;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.legend{display:flex;flex-wrap:wrap;align-items:center;gap:4px 14px;margin:0 0 10px;font-size:12px;color:#334155}
.legend span{display:inline-flex;align-items:center;gap:4px}
.legend i{flex-basis:100%;height:0}
.chart{display:flex;background:#fff;border:1px solid var(--line);border-radius:8px;overflow:hidden}
.labels{flex:none;border-right:1px solid var(--line)}
.scroll{overflow-x:auto;flex:1 1 auto}
svg{display:block}
svg text{font-family:inherit}
.name{font-size:13px;font-weight:600;fill:#0f172a}
.lab .meta{font-size:11px;fill:#64748b}
.pill{font-size:10px;fill:#0f172a}
.pill.inv{fill:#fff}
.axl{font-size:10px;fill:#94a3b8;text-transform:uppercase;letter-spacing:.04em}
.tick{font-size:10px;fill:#64748b;text-anchor:middle}
.grid{stroke:#e2e8f0;stroke-width:1}
.axis{stroke:#cbd5e1;stroke-width:1}
.band{font-size:11px;fill:#1e293b}
.band.inv{fill:#fff}
.gt{font-size:9px;font-weight:700;fill:#fff;text-anchor:middle}
.verdict{font-size:10px;font-weight:600;fill:#6d28d9}
.flag{font-size:10px;font-weight:600;fill:#fff}
.spawn{stroke:#475569;stroke-width:1.5}
.churn{stroke:#7f1d1d;stroke-width:2;stroke-dasharray:2 1}
.timer{stroke:#b45309;stroke-width:1.5;fill:none}
.timer.dead{stroke:#94a3b8;stroke-dasharray:3 2}
.timer.hold{stroke:#b91c1c}
.tlbl{font-size:9px;fill:#92400e;text-anchor:middle}
.h{cursor:pointer}
.h:hover{filter:brightness(.88)}
.h.pinned{filter:drop-shadow(0 0 2px #0f172a)}
.hint{color:var(--muted);font-size:12px;margin:6px 2px}
table{border-collapse:collapse;background:#fff;border:1px solid var(--line);border-radius:8px;font-size:12.5px;min-width:900px}
th,td{padding:6px 12px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:#f8fafc;color:#475569;font-weight:600;white-space:nowrap}
td.st{white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
td.srv{font-weight:600}
td.hot{color:#b91c1c;font-weight:600}
td.err{color:#7f1d1d;max-width:380px}
td.n{white-space:nowrap}
.brk{font-size:11px;font-weight:400;color:var(--muted);white-space:normal;max-width:230px;margin-left:auto}
.brk span{white-space:nowrap}
span.pill{display:inline-block;padding:0 8px;border-radius:8px;font-size:11.5px}
.muted{color:var(--muted);font-weight:400}
.foot{color:var(--muted);font-size:12px}
#detail{position:fixed;right:16px;bottom:16px;max-width:600px;max-height:50vh;overflow:auto;margin:0;padding:10px 14px;background:#0f172a;color:#f1f5f9;border-radius:8px;box-shadow:0 6px 24px rgba(15,23,42,.35);white-space:pre-wrap;font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace}
#detail[hidden]{display:none}
`

// tlJS shows the hovered (or clicked) element's SVG title in the detail
// panel. It avoids < and & so the whole page stays well-formed XML.
const tlJS = `
(function(){
var d=document.getElementById('detail'),pin=null;
function tip(n){
  for(;n;n=n.parentNode){
    if(n.nodeType!==1){return null}
    var c=n.firstElementChild;
    if(c){if(c.tagName.toLowerCase()==='title'){return n}}
  }
  return null;
}
function show(n){d.textContent=n.firstElementChild.textContent;d.hidden=false}
document.addEventListener('mouseover',function(e){
  if(pin){return}
  var n=tip(e.target);
  if(n){show(n)}else{d.hidden=true}
});
document.addEventListener('click',function(e){
  var n=tip(e.target);
  if(pin){pin.classList.remove('pinned')}
  pin=n;
  if(n){n.classList.add('pinned');show(n)}else{d.hidden=true}
});
})();
`
