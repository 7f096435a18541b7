package replay_test

import (
	"bytes"
	"testing"

	"github.com/mcpledger/mcpledger/replay"
)

// BenchmarkExport measures what sealing costs: a session of 20,000
// events written and read back sealed (WriteExport, ReadExport), beside
// the same session as plain JSON lines (WriteJSONL, ReadJSONL), the
// format exports had before, in the same run.
func BenchmarkExport(b *testing.B) {
	evs := synthSession(b, 20_000, 20)
	for _, c := range []struct {
		name  string
		write func(*bytes.Buffer) error
		read  func(*bytes.Buffer) error
	}{
		{"plain", func(w *bytes.Buffer) error { return replay.WriteJSONL(w, evs) },
			func(r *bytes.Buffer) error { _, err := replay.ReadJSONL(r); return err }},
		{"sealed", func(w *bytes.Buffer) error {
			_, err := replay.WriteExport(w, evs, replay.WriteExportOptions{})
			return err
		}, func(r *bytes.Buffer) error { _, err := replay.ReadExport(r, replay.ReadExportOptions{}); return err }},
	} {
		var buf bytes.Buffer
		if err := c.write(&buf); err != nil {
			b.Fatal(err)
		}
		file := bytes.Clone(buf.Bytes())
		b.Run(c.name+"/write", func(b *testing.B) {
			for b.Loop() {
				buf.Reset()
				if err := c.write(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(buf.Len())/float64(len(evs)), "B/event")
		})
		b.Run(c.name+"/read", func(b *testing.B) {
			for b.Loop() {
				if err := c.read(bytes.NewBuffer(file)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
