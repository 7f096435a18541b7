package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/mcpledger/mcpledger/events"
)

// WriteJSONL writes events one JSON object per line, the shape of
// `mcpledger log --json`, without a seal: the format of the golden
// journals under testdata/journals, and of exports before they were
// sealed. `mcpledger export` writes [WriteExport]'s.
func WriteJSONL(w io.Writer, evs []events.Event) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("export seq %d: %w", e.Seq, err)
		}
	}
	return bw.Flush()
}

// ReadJSONL reads events written by WriteJSONL, upcasting old schema
// versions. A line that does not decode is reported with its number. It
// checks no seal: an export is read with [ReadExport].
func ReadJSONL(r io.Reader) ([]events.Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []events.Event
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var e events.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return out, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
