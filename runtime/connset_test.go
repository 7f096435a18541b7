package runtime

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestConnSetEndsAStreamBeingRead: a response body being read (as an SSE
// stream is, waiting for the server's next event) holds its connection;
// CloseIdleConnections leaves it, closeAll ends it, and nothing is dialed
// after.
func TestConnSetEndsAStreamBeingRead(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // an event stream with nothing to say
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	conns := newConnSet()
	tr := newHTTPTransport(conns)
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read := make(chan error, 1)
	go func() { // ends when the body's connection does
		_, err := io.Copy(io.Discard, resp.Body)
		read <- err
	}()

	tr.CloseIdleConnections()
	select {
	case err := <-read:
		t.Fatalf("the stream ended on CloseIdleConnections (%v): the test no longer shows what closeAll is for", err)
	case <-time.After(100 * time.Millisecond):
	}
	conns.closeAll()
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still being read 5 s after closeAll")
	}
	if _, err := client.Get(srv.URL); err == nil {
		t.Error("a request after closeAll dialed a new connection")
	}
}
