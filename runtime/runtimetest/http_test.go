package runtimetest

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestAddrOutsideEphemeral(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range:", err)
	}
	low, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		addr := AddrOutsideEphemeral(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		if host != "127.0.0.1" || p < 1024 || p >= low {
			t.Fatalf("%s: want 127.0.0.1 and a port in [1024, %d)", addr, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		ln.Close()
	}
}

func TestTryStartHTTPReportsAPortInUse(t *testing.T) {
	bin := BuildServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, _, err = TryStartHTTP(t, bin, nil, "-http", ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("TryStartHTTP on a port in use: %v, want the server's bind error", err)
	}
}
