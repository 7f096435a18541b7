// Command gwtable reads the output of rounds of BenchmarkGateway
// (runtime/gateway; `go test -bench` text, any number of rounds one after
// another, as bench/gateway.sh writes it) on stdin and prints the medians
// the gateway's targets are judged on:
//
//   - per sub-benchmark, p50 at c=1 and the time per call at c=16;
//   - per gateway path (via-serve-relaxed, via-serve, via-tbxark), the p50
//     it adds at c=1 over direct-stdio, and its c=16 throughput as a
//     fraction of direct-stdio's and of via-tbxark's;
//   - the audit floor: floor=direct+2-commits' p50 minus direct's; at
//     c=16 floor=direct-stdio+2-commits' throughput as a fraction of
//     via-tbxark's, and that of a gateway as fast as via-tbxark that adds
//     the shared commits (via-tbxark's time per call plus the floor's
//     minus direct-stdio's);
//   - what would move the audit floor: the commits' cost at c=1 and c=16
//     on bbolt and on a log that syncs once per commit
//     (floor=direct-stdio+2-wal-syncs), and the peer with the log's cost
//     on top;
//   - the runtime's share: what Manager.CallTool in process
//     (manager-stdio-relaxed) adds to a go-sdk client's call
//     (direct-stdio), at c=1 (p50) and c=16 (time per call); and what
//     relaxed would measure with an HTTP face as fast as the peer's and
//     that share on top (via-tbxark's figures plus the share), so that
//     what relaxed misses by splits into the HTTP face and the runtime
//     (roughly: the peer's own client of the server is mcp-go's, not
//     go-sdk's);
//   - the issue 21 targets, met or missed.
//
// The n-th result of a sub-benchmark belongs to round n. A derived figure
// is computed in each round from that round's results, and its median over
// the rounds is printed with the minimum and maximum in brackets.
//
//	go test ./runtime/gateway -run '^$' -bench Gateway -benchtime=2000x -count 1 | go run ./bench/gwtable
//
// It owns the reading of benchmark text and the arithmetic; it must not
// run benchmarks (bench/gateway.sh does).
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one result line: a sub-benchmark at one concurrency.
type result struct {
	path    string // e.g. via-serve
	c       string // c=1 or c=16
	metrics map[string]float64
}

// line matches a result of BenchmarkGateway: the path, the concurrency,
// the GOMAXPROCS suffix, the iterations and the metrics.
var line = regexp.MustCompile(`^BenchmarkGateway/(\S+)/(c=\d+)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads the result lines of r, in order, and ignores the others.
func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("gwtable: metrics not in value-unit pairs: %q", sc.Text())
		}
		res := result{path: m[1], c: m[2], metrics: map[string]float64{}}
		for i := 0; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("gwtable: %q: %w", sc.Text(), err)
			}
			res.metrics[f[i+1]] = v
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// rounds holds, per round, the metric of each sub-benchmark:
// rounds[n]["via-serve c=1 p50-ns"].
type rounds []map[string]float64

func key(path, c, metric string) string { return path + " " + c + " " + metric }

// group assigns the n-th result of each sub-benchmark to round n.
func group(results []result) rounds {
	var rs rounds
	seen := map[string]int{}
	for _, r := range results {
		n := seen[r.path+" "+r.c]
		seen[r.path+" "+r.c]++
		for len(rs) <= n {
			rs = append(rs, map[string]float64{})
		}
		for m, v := range r.metrics {
			rs[n][key(r.path, r.c, m)] = v
		}
	}
	return rs
}

// stat is a median with the range it was taken from.
type stat struct {
	med, min, max float64
	n             int
}

// over computes f in each round where all it reads is present, and the
// median of those values.
func (rs rounds) over(f func(get func(string) float64) float64) (stat, bool) {
	var vs []float64
	for _, r := range rs {
		missing := false
		v := f(func(k string) float64 {
			x, ok := r[k]
			if !ok {
				missing = true
			}
			return x
		})
		if !missing {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return stat{}, false
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return stat{med: med, min: vs[0], max: vs[len(vs)-1], n: len(vs)}, true
}

func (rs rounds) metric(path, c, m string) (stat, bool) {
	return rs.over(func(get func(string) float64) float64 { return get(key(path, c, m)) })
}

// paths lists the sub-benchmarks in the order they first appear.
func paths(results []result) []string {
	var ps []string
	for _, r := range results {
		if !slices.Contains(ps, r.path) {
			ps = append(ps, r.path)
		}
	}
	return ps
}

const (
	stdio  = "direct-stdio"
	tbxark = "via-tbxark"
	floor  = "floor=direct+2-commits"
	// floor16 is the audit floor at c=16: group commits, no HTTP hop.
	floor16 = "floor=direct-stdio+2-commits"
	// floorWAL is floor16 with a log that syncs once per commit.
	floorWAL = "floor=direct-stdio+2-wal-syncs"
	// managerRelaxed is the runtime's call path in process, relaxed.
	managerRelaxed = "manager-stdio-relaxed"
)

// gateways are the paths the derived figures are given for.
var gateways = []string{"via-serve-relaxed", "via-serve", tbxark}

func ms(ns float64) string { return strconv.FormatFloat(ns/1e6, 'f', 3, 64) }

func fmtMs(s stat, ok bool, sign bool) string {
	if !ok {
		return "–"
	}
	p := ""
	if sign && s.med >= 0 {
		p = "+"
	}
	return fmt.Sprintf("%s%s [%s–%s]", p, ms(s.med), ms(s.min), ms(s.max))
}

func fmtX(s stat, ok bool) string {
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", s.med, s.min, s.max)
}

// report writes the tables for results to w.
func report(w io.Writer, results []result) error {
	if len(results) == 0 {
		return errors.New("gwtable: no BenchmarkGateway results on stdin")
	}
	rs := group(results)
	fmt.Fprintf(w, "rounds: %d (median [min–max] over the rounds; times in ms)\n\n", len(rs))

	fmt.Fprintln(w, "| sub-benchmark | p50 c=1 | p99 c=1 | time per call c=16 | calls/s c=16 | gateway CPU per call c=1 | c=16 | client CPU per call c=16 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, p := range paths(results) {
		p50, ok50 := rs.metric(p, "c=1", "p50-ns")
		p99, ok99 := rs.metric(p, "c=1", "p99-ns")
		per, okPer := rs.metric(p, "c=16", "ns/call")
		cpu1, okCPU1 := rs.metric(p, "c=1", "gw-cpu-ns/call")
		cpu16, okCPU16 := rs.metric(p, "c=16", "gw-cpu-ns/call")
		client16, okClient16 := rs.metric(p, "c=16", "client-cpu-ns/call")
		cps := "–"
		if okPer {
			cps = strconv.FormatFloat(1e9/per.med, 'f', 0, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", p, fmtMs(p50, ok50, false), fmtMs(p99, ok99, false), fmtMs(per, okPer, false), cps,
			fmtMs(cpu1, okCPU1, false), fmtMs(cpu16, okCPU16, false), fmtMs(client16, okClient16, false))
	}

	added := func(p string) (stat, bool) {
		return rs.over(func(get func(string) float64) float64 {
			return get(key(p, "c=1", "p50-ns")) - get(key(stdio, "c=1", "p50-ns"))
		})
	}
	// ratio is the c=16 throughput of p as a fraction of base's.
	ratio := func(p, base string) (stat, bool) {
		return rs.over(func(get func(string) float64) float64 {
			return get(key(base, "c=16", "ns/call")) / get(key(p, "c=16", "ns/call"))
		})
	}
	fmt.Fprintln(w, "\n| path | p50 added over direct-stdio | c=16 throughput / direct-stdio | c=16 throughput / via-tbxark |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, p := range gateways {
		a, okA := added(p)
		rStdio, okS := ratio(p, stdio)
		rPeer, okP := ratio(p, tbxark)
		if !okA && !okS {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", p, fmtMs(a, okA, true), fmtX(rStdio, okS), fmtX(rPeer, okP))
	}
	fl, okF := rs.over(func(get func(string) float64) float64 {
		return get(key(floor, "c=1", "p50-ns")) - get(key("direct", "c=1", "p50-ns"))
	})
	fmt.Fprintf(w, "\naudit floor (floor=direct+2-commits p50 − direct p50, c=1): %s\n", fmtMs(fl, okF, true))
	fl16, okF16 := ratio(floor16, tbxark)
	fmt.Fprintf(w, "audit floor at c=16 (floor=direct-stdio+2-commits throughput / via-tbxark): %s\n", fmtX(fl16, okF16))
	// onPeer is the peer with what p adds to direct-stdio on top: its p50
	// added over direct-stdio (c=1), and its c=16 throughput as a
	// fraction of the peer's.
	onPeer := func(p string) (p50 stat, okP50 bool, x16 stat, okX16 bool) {
		p50, okP50 = rs.over(func(get func(string) float64) float64 {
			return get(key(tbxark, "c=1", "p50-ns")) - get(key(stdio, "c=1", "p50-ns")) +
				get(key(p, "c=1", "p50-ns")) - get(key(stdio, "c=1", "p50-ns"))
		})
		x16, okX16 = rs.over(func(get func(string) float64) float64 {
			peer := get(key(tbxark, "c=16", "ns/call"))
			return peer / (peer + get(key(p, "c=16", "ns/call")) - get(key(stdio, "c=16", "ns/call")))
		})
		return
	}
	// A gateway whose hop cost the peer's and whose journal cost the raw
	// shared commits: the peer's time per call plus what the commits add
	// to direct-stdio's, at c=16.
	_, _, peerPlus, okPP := onPeer(floor16)
	fmt.Fprintf(w, "the peer plus the commits at c=16 (via-tbxark's time per call + floor=direct-stdio+2-commits' − direct-stdio's, throughput / via-tbxark): %s\n", fmtX(peerPlus, okPP))

	// What would move the floors: the same commits, stdio, on bbolt and on
	// a log that syncs once per commit; and the peer with those on top.
	adds := func(fl, c, metric string) (stat, bool) {
		return rs.over(func(get func(string) float64) float64 {
			return get(key(fl, c, metric)) - get(key(stdio, c, metric))
		})
	}
	bolt1, okB1 := adds(floor16, "c=1", "p50-ns")
	wal1, okW1 := adds(floorWAL, "c=1", "p50-ns")
	wal16, okW16 := adds(floorWAL, "c=16", "ns/call")
	fmt.Fprintf(w, "two commits added to direct-stdio's p50, c=1: bbolt %s; a log syncing once per commit (floor=direct-stdio+2-wal-syncs) %s; time per call c=16: %s\n",
		fmtMs(bolt1, okB1, true), fmtMs(wal1, okW1, true), fmtMs(wal16, okW16, true))
	peerWAL1, okPW1, peerWAL16, okPW16 := onPeer(floorWAL)
	fmt.Fprintf(w, "the peer plus a log's two syncs: p50 added over direct-stdio %s; c=16 throughput / via-tbxark %s\n", fmtMs(peerWAL1, okPW1, true), fmtX(peerWAL16, okPW16))

	// The runtime's share: what Manager.CallTool (guard, call records,
	// the plain call) adds to a go-sdk client's call of the same server,
	// both in process; and the peer with that share on top, the figures
	// relaxed would have if its HTTP face cost what the peer's does.
	share1, okS1 := rs.over(func(get func(string) float64) float64 {
		return get(key(managerRelaxed, "c=1", "p50-ns")) - get(key(stdio, "c=1", "p50-ns"))
	})
	share16, okS16 := rs.over(func(get func(string) float64) float64 {
		return get(key(managerRelaxed, "c=16", "ns/call")) - get(key(stdio, "c=16", "ns/call"))
	})
	fmt.Fprintf(w, "\nthe runtime's share (manager-stdio-relaxed − direct-stdio): p50 c=1 %s; time per call c=16 %s\n", fmtMs(share1, okS1, true), fmtMs(share16, okS16, true))
	peerShare1, okPS1, peerShare16, okPS16 := onPeer(managerRelaxed)
	fmt.Fprintf(w, "the peer plus the runtime's share: p50 added over direct-stdio %s; c=16 throughput / via-tbxark %s\n", fmtMs(peerShare1, okPS1, true), fmtX(peerShare16, okPS16))

	fmt.Fprintln(w, "\ntargets (issue 21), judged on the medians above:")
	peerAdded, okPeer := added(tbxark)
	if !okPeer {
		fmt.Fprintln(w, "  none judged: via-tbxark did not run (MCPLEDGER_BENCH_TBXARK unset; bench/tbxark.sh builds the peer)")
		return nil
	}
	x := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }
	relA, okRA := added("via-serve-relaxed")
	relR, okRR := ratio("via-serve-relaxed", tbxark)
	audA, okAA := added("via-serve")
	audR, okAR := ratio("via-serve", tbxark)
	check(w, "via-serve-relaxed p50 added (ms)", relA, okRA, "≤", peerAdded.med, ms)
	check(w, "via-serve-relaxed c=16 throughput / via-tbxark", relR, okRR, "≥", 1, x)
	check(w, "via-serve p50 added (ms), ≤ via-tbxark's + 0.5", audA, okAA, "≤", peerAdded.med+0.5e6, ms)
	check(w, "via-serve c=16 throughput / via-tbxark", audR, okAR, "≥", 0.8, x)
	return nil
}

// check writes one target: the median have against bound ("≤" or "≥"),
// both shown with format.
func check(w io.Writer, name string, have stat, ok bool, op string, bound float64, format func(float64) string) {
	if !ok {
		fmt.Fprintf(w, "  %s: not measured\n", name)
		return
	}
	met := have.med <= bound
	if op == "≥" {
		met = have.med >= bound
	}
	verdict := "missed"
	if met {
		verdict = "met"
	}
	fmt.Fprintf(w, "  %s: %s (%s %s): %s\n", name, format(have.med), op, format(bound), verdict)
}

func main() {
	results, err := parse(os.Stdin)
	if err == nil {
		err = report(os.Stdout, results)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
