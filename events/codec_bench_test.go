package events

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// benchEvent is the event of the store benchmarks (storetest.Event): a
// lifecycle transition with a classified error, about 250 bytes encoded.
func benchEvent() Event {
	e := New(time.Date(2025, 5, 7, 14, 2, 0, 0, time.UTC), "server-7", &ServerTransitioned{
		From: StateReady, To: StateReconnecting, Trigger: "transport_closed", Attempt: 3,
		Error: &ClassifiedError{Class: ErrTransportClosed, Message: "read |0: file already closed"},
	})
	e.ID, e.Session = NewID(), uuid.Must(uuid.NewV7())
	e.Seq, e.GPos, e.V = 12345, 678901, e.Kind.Version()
	return e
}

func BenchmarkEncode(b *testing.B) {
	e := benchEvent()
	enc := NewEncoder()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = enc.Append(buf[:0], &e); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecode(b *testing.B) {
	e := benchEvent()
	rec, err := Encode(&e)
	if err != nil {
		b.Fatal(err)
	}
	dec := NewDecoder()
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if _, err := dec.Decode(rec); err != nil {
			b.Fatal(err)
		}
	}
}
