//go:build linux

package hosts

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// nsDialer creates sockets inside one network namespace: a socket belongs
// to the namespace of the thread that created it, so each dial runs on a
// locked OS thread that enters the namespace (setns(2)), creates the
// socket, and goes back. Connecting then proceeds on any thread.
type nsDialer struct {
	ns *os.File
}

func newNSDialer(name string) (*nsDialer, error) {
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		return nil, fmt.Errorf("hosts: open namespace %s: %w", name, err)
	}
	return &nsDialer{ns: f}, nil
}

// DialContext is net.Dialer.DialContext from inside the namespace.
func (d *nsDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var c net.Conn
	err := d.do(func() error {
		var nd net.Dialer
		var err error
		c, err = nd.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// Listen is net.Listen from inside the namespace.
func (d *nsDialer) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := d.do(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// do runs fn on a fresh locked OS thread that has entered the namespace,
// so the sockets fn creates belong to it.
func (d *nsDialer) do(fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("hosts: own namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(d.ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("hosts: setns: %w", err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			// Only a thread back in its own namespace may run other
			// goroutines; otherwise it dies with this one.
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// Close releases the namespace handle.
func (d *nsDialer) Close() { _ = d.ns.Close() }
