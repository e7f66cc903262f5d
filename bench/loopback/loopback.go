package loopback

import (
	"fmt"
	"net"
)

// FreeAddrs returns n distinct free "127.0.0.1:port" addresses. It listens on
// port 0 n times at once (so the kernel hands out n different ports), then
// closes the listeners. Errors: the listen error, wrapped.
func FreeAddrs(n int) ([]string, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("loopback: free port: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}
