package main

import (
	"fmt"
	"strings"
	"testing"
)

// round writes one round of BenchmarkGateway output: p50 (c=1) and
// ns/call (c=16) per path, in ns, with the noise go test prints around.
func round(p50, perCall map[string]int) string {
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: github.com/mcpledger/mcpledger/runtime/gateway\n")
	for _, p := range []string{"direct", "direct-stdio", "floor=direct+2-commits", "floor=direct-stdio+2-commits", "floor=direct-stdio+2-wal-syncs", "via-serve", "via-serve-relaxed", "via-tbxark", "manager-stdio-relaxed"} {
		cpu := "" // a gateway's own CPU per call: half its p50 (c=1) or its time per call (c=16)
		if v, ok := p50[p]; ok {
			if strings.HasPrefix(p, "via-") {
				cpu = fmt.Sprintf("\t %d gw-cpu-ns/call", v/2)
			}
			fmt.Fprintf(&b, "BenchmarkGateway/%s/c=1-2   \t 200\t %d ns/op%s\t %d ns/call\t %d p50-ns\t %d p99-ns\n", p, v+7, cpu, v+5, v, 3*v)
		}
		if v, ok := perCall[p]; ok {
			if strings.HasPrefix(p, "via-") {
				cpu = fmt.Sprintf("\t %d gw-cpu-ns/call", v/2)
			}
			// the client's CPU per call: a third of the time per call
			fmt.Fprintf(&b, "BenchmarkGateway/%s/c=16-2  \t 200\t %d ns/op%s\t %d ns/call\t 99 p50-ns\t 999 p99-ns\t %d client-cpu-ns/call\n", p, v+1, cpu, v, v/3)
		}
	}
	b.WriteString("PASS\nok  \tgithub.com/mcpledger/mcpledger/runtime/gateway\t12.3s\n")
	return b.String()
}

func run(t *testing.T, in string) string {
	t.Helper()
	results, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := report(&out, results); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestReport(t *testing.T) {
	// Three rounds. direct-stdio drifts between rounds, so a figure taken
	// from each round's numbers differs from one taken from the medians:
	// relaxed's added p50 is 0.4, 0.3, 1.0 ms (median 0.4), while the
	// difference of the medians would be 1.0 − 0.2 = 0.8 ms.
	in := round(
		map[string]int{"direct": 400_000, "direct-stdio": 200_000, "floor=direct+2-commits": 1_400_000, "floor=direct-stdio+2-commits": 1_200_000, "floor=direct-stdio+2-wal-syncs": 600_000, "via-serve": 2_600_000, "via-serve-relaxed": 600_000, "via-tbxark": 500_000, "manager-stdio-relaxed": 300_000},
		map[string]int{"direct-stdio": 100_000, "floor=direct-stdio+2-commits": 110_000, "floor=direct-stdio+2-wal-syncs": 105_000, "via-serve": 400_000, "via-serve-relaxed": 200_000, "via-tbxark": 125_000, "manager-stdio-relaxed": 125_000},
	) + round(
		map[string]int{"direct": 500_000, "direct-stdio": 700_000, "floor=direct+2-commits": 1_700_000, "floor=direct-stdio+2-commits": 1_500_000, "floor=direct-stdio+2-wal-syncs": 1_000_000, "via-serve": 2_700_000, "via-serve-relaxed": 1_000_000, "via-tbxark": 1_100_000, "manager-stdio-relaxed": 750_000},
		map[string]int{"direct-stdio": 200_000, "floor=direct-stdio+2-commits": 260_000, "floor=direct-stdio+2-wal-syncs": 250_000, "via-serve": 400_000, "via-serve-relaxed": 250_000, "via-tbxark": 250_000, "manager-stdio-relaxed": 250_000},
	) + round(
		map[string]int{"direct": 450_000, "direct-stdio": 100_000, "floor=direct+2-commits": 1_450_000, "floor=direct-stdio+2-commits": 1_300_000, "floor=direct-stdio+2-wal-syncs": 500_000, "via-serve": 1_300_000, "via-serve-relaxed": 1_100_000, "via-tbxark": 400_000, "manager-stdio-relaxed": 300_000},
		map[string]int{"direct-stdio": 150_000, "floor=direct-stdio+2-commits": 120_000, "floor=direct-stdio+2-wal-syncs": 150_000, "via-serve": 300_000, "via-serve-relaxed": 150_000, "via-tbxark": 100_000, "manager-stdio-relaxed": 150_000},
	)
	out := run(t, in)
	for _, want := range []string{
		"rounds: 3 ",
		// the medians of the raw figures; calls/s from the median per call
		// with the gateway's CPU per call: half the p50 (c=1), half the time per call (c=16)
		// and the client's CPU per call, a third of the time per call (c=16)
		"| via-serve-relaxed | 1.000 [0.600–1.100] | 3.000 [1.800–3.300] | 0.200 [0.150–0.250] | 5000 | 0.500 [0.300–0.550] | 0.100 [0.075–0.125] | 0.067 [0.050–0.083] |",
		"| floor=direct+2-commits | 1.450 [1.400–1.700] | 4.350 [4.200–5.100] | – | – | – | – | – |",
		// added over direct-stdio per round: 0.4, 0.3, 1.0 → 0.4; c=16
		// ratios per round: stdio 0.5, 0.8, 1.0; tbxark 0.625, 1.0, 0.667
		"| via-serve-relaxed | +0.400 [0.300–1.000] | 0.80× [0.50–1.00] | 0.67× [0.62–1.00] |",
		// audit: added 2.4, 2.0, 1.2 → 2.0; / stdio 0.25, 0.5, 0.5; / tbxark 0.3125, 0.625, 0.333
		"| via-serve | +2.000 [1.200–2.400] | 0.50× [0.25–0.50] | 0.33× [0.31–0.62] |",
		// the peer: added 0.3, 0.4, 0.3 → 0.3; against itself 1
		"| via-tbxark | +0.300 [0.300–0.400] | 0.80× [0.80–1.50] | 1.00× [1.00–1.00] |",
		// floor − direct per round: 1.0, 1.2, 1.0
		"audit floor (floor=direct+2-commits p50 − direct p50, c=1): +1.000 [1.000–1.200]",
		// via-tbxark's time per call / the floor's, per round: 1.136, 0.962, 0.833
		"audit floor at c=16 (floor=direct-stdio+2-commits throughput / via-tbxark): 0.96× [0.83–1.14]",
		// the commits add 10, 60, −30 µs to direct-stdio: 125/135, 250/310, 100/70
		"the peer plus the commits at c=16 (via-tbxark's time per call + floor=direct-stdio+2-commits' − direct-stdio's, throughput / via-tbxark): 0.93× [0.81–1.43]",
		// bbolt's commits over direct-stdio per round, c=1: 1.0, 0.8, 1.2;
		// the log's: 0.4, 0.3, 0.4; c=16: 5, 50, 0 µs
		"two commits added to direct-stdio's p50, c=1: bbolt +1.000 [0.800–1.200]; a log syncing once per commit (floor=direct-stdio+2-wal-syncs) +0.400 [0.300–0.400]; time per call c=16: +0.005 [0.000–0.050]",
		// the peer's added p50 plus the log's: 0.7, 0.7, 0.7; c=16
		// 125/130, 250/300, 100/100
		"the peer plus a log's two syncs: p50 added over direct-stdio +0.700 [0.700–0.700]; c=16 throughput / via-tbxark 0.96× [0.83–1.00]",
		// the runtime's share per round: p50 0.1, 0.05, 0.2 → 0.1; c=16
		// 25, 50, 0 µs → 25
		"the runtime's share (manager-stdio-relaxed − direct-stdio): p50 c=1 +0.100 [0.050–0.200]; time per call c=16 +0.025 [0.000–0.050]",
		// the peer's added p50 plus the share: 0.4, 0.45, 0.5; c=16
		// 125/150, 250/300, 100/100
		"the peer plus the runtime's share: p50 added over direct-stdio +0.450 [0.400–0.500]; c=16 throughput / via-tbxark 0.83× [0.83–1.00]",
		"via-serve-relaxed p50 added (ms): 0.400 (≤ 0.300): missed",
		"via-serve-relaxed c=16 throughput / via-tbxark: 0.67× (≥ 1.00×): missed",
		"via-serve p50 added (ms), ≤ via-tbxark's + 0.5: 2.000 (≤ 0.800): missed",
		"via-serve c=16 throughput / via-tbxark: 0.33× (≥ 0.80×): missed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestReportTargetsMet(t *testing.T) {
	in := round(
		map[string]int{"direct-stdio": 200_000, "via-serve": 1_000_000, "via-serve-relaxed": 500_000, "via-tbxark": 500_000},
		map[string]int{"direct-stdio": 100_000, "via-serve": 125_000, "via-serve-relaxed": 100_000, "via-tbxark": 100_000},
	)
	out := run(t, in)
	for _, want := range []string{
		"via-serve-relaxed p50 added (ms): 0.300 (≤ 0.300): met",
		"via-serve-relaxed c=16 throughput / via-tbxark: 1.00× (≥ 1.00×): met",
		"via-serve p50 added (ms), ≤ via-tbxark's + 0.5: 0.800 (≤ 0.800): met",
		"via-serve c=16 throughput / via-tbxark: 0.80× (≥ 0.80×): met",
		"audit floor (floor=direct+2-commits p50 − direct p50, c=1): –",
		"audit floor at c=16 (floor=direct-stdio+2-commits throughput / via-tbxark): –",
		"the peer plus the commits at c=16 (via-tbxark's time per call + floor=direct-stdio+2-commits' − direct-stdio's, throughput / via-tbxark): –",
		"two commits added to direct-stdio's p50, c=1: bbolt –; a log syncing once per commit (floor=direct-stdio+2-wal-syncs) –; time per call c=16: –",
		"the peer plus a log's two syncs: p50 added over direct-stdio –; c=16 throughput / via-tbxark –",
		"the runtime's share (manager-stdio-relaxed − direct-stdio): p50 c=1 –; time per call c=16 –",
		"the peer plus the runtime's share: p50 added over direct-stdio –; c=16 throughput / via-tbxark –",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

func TestReportWithoutPeer(t *testing.T) {
	in := round(
		map[string]int{"direct-stdio": 200_000, "via-serve": 1_000_000},
		map[string]int{"direct-stdio": 100_000, "via-serve": 200_000},
	) + "--- SKIP: BenchmarkGateway/via-tbxark\n"
	out := run(t, in)
	for _, want := range []string{
		"| via-serve | +0.800 [0.800–0.800] | 0.50× [0.50–0.50] | – |",
		"none judged: via-tbxark did not run",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| via-tbxark |") {
		t.Errorf("a row for via-tbxark, which did not run:\n%s", out)
	}
}

func TestParseErrors(t *testing.T) {
	if _, err := parse(strings.NewReader("BenchmarkGateway/direct/c=1-2 \t 10\t 5 ns/op\t 7\n")); err == nil {
		t.Error("metrics not in pairs: no error")
	}
	if _, err := parse(strings.NewReader("BenchmarkGateway/direct/c=1-2 \t 10\t x ns/op\n")); err == nil {
		t.Error("a metric that is not a number: no error")
	}
	results, err := parse(strings.NewReader("PASS\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := report(new(strings.Builder), results); err == nil {
		t.Error("no results: no error")
	}
}
