package watch_test

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/watch"
)

// BenchmarkApply measures a grant+release cycle through the state machine
// and the hub, as a node's apply goroutine runs it: with no watcher, with a
// stuck watcher that never reads (it is ended with ErrSlow once its buffer
// fills, and apply does not wait for it), with a live watcher drained by
// another goroutine, and with 1,000 watchers of another prefix.
func BenchmarkApply(b *testing.B) {
	cases := []struct {
		name  string
		setup func(b *testing.B, h *watch.Hub)
	}{
		{"no_watcher", func(*testing.B, *watch.Hub) {}},
		{"stuck_watcher", func(b *testing.B, h *watch.Hub) {
			w, err := h.Watch(watch.Request{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(w.Close)
		}},
		{"live_watcher", func(b *testing.B, h *watch.Hub) {
			w, err := h.Watch(watch.Request{})
			if err != nil {
				b.Fatal(err)
			}
			go func() {
				for {
					select {
					case <-w.Events():
					case <-w.Done():
						return
					}
				}
			}()
			b.Cleanup(w.Close)
		}},
		{"1000_other_prefix_watchers", func(b *testing.B, h *watch.Hub) {
			for i := range 1000 {
				w, err := h.Watch(watch.Request{Prefix: fmt.Sprintf("other/%d/", i)})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(w.Close)
			}
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			sm := core.NewStateMachine()
			cfg := watch.DefaultConfig()
			cfg.Applied = sm.AppliedIndex
			h, err := watch.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(h.Close)
			c.setup(b, h)
			var idx uint64
			apply := func(cmd core.Command) core.Result {
				idx++
				res, err := sm.Apply(idx, cmd)
				if err != nil {
					b.Fatal(err)
				}
				h.Apply(idx, cmd, res)
				return res
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				g := apply(core.Grant("jobs/a", 1000, "o"))
				apply(core.Release("jobs/a", g.Token))
			}
		})
	}
}
