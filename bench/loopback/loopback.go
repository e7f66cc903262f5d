package loopback

import (
	"fmt"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// FreeAddrs returns n distinct free "127.0.0.1:port" addresses, picked as the
// test clusters pick theirs (ticketdtest.PickAddrs): below the kernel's
// ephemeral range, so that no outgoing connection of another process can
// take one as its source port before the cluster binds it, and never one
// handed out before in this process. Errors: no free port, wrapped.
func FreeAddrs(n int) ([]string, error) {
	addrs, err := ticketdtest.PickAddrs(n)
	if err != nil {
		return nil, fmt.Errorf("loopback: %w", err)
	}
	return addrs, nil
}
