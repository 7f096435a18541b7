package runtime_test

import "net"

func listenOn(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
