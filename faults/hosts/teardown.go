//go:build linux

package hosts

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// live holds the teardown functions of every Network not yet closed, so
// that SIGINT or SIGTERM removes their namespaces and processes before the
// test process exits.
var live struct {
	sync.Mutex
	next    int
	closers map[int]func()
	once    sync.Once
}

// register adds close to the set run on SIGINT/SIGTERM and returns the
// function that removes it again.
func register(close func()) (unregister func()) {
	live.once.Do(func() {
		live.closers = map[int]func(){}
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			live.Lock()
			for _, c := range live.closers {
				c()
			}
			live.Unlock()
			code := 130
			if sig == syscall.SIGTERM {
				code = 143
			}
			os.Exit(code)
		}()
	})
	live.Lock()
	defer live.Unlock()
	id := live.next
	live.next++
	live.closers[id] = close
	return func() {
		live.Lock()
		delete(live.closers, id)
		live.Unlock()
	}
}
