package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/watch"
)

// This file is the harness's Watch streams (the interaction scripts' watch
// verb) and the watch invariant W1 they check after every step:
//
//	W1 a watcher receives, after the STARTED event that announces the index
//	   it starts after, every change under its prefix with a greater index
//	   exactly once, in log order, and nothing else: no change at or below
//	   the announced index, no change before the announcement, none twice,
//	   none missing once the node has settled (docs/api.md#watch).
//
// The expected changes are derived from the harness's own record of every
// applied entry (watch.AppendEvents, as every node derives them), not from
// the node's watch hub.

// harnessWatch is one Watch stream the harness opened, and what it received.
type harnessWatch struct {
	name, prefix string
	started      bool
	start        uint64        // the announced index (valid once started)
	got          []watch.Event // changes received after the announcement
	lines        []string      // received since the last settle, printed then
	cancel       context.CancelFunc
	done         chan error
	ended        bool
}

// watchOpen opens a Watch of prefix as client name through the LockService
// path (the linearizable start, then the node's hub), from startIndex
// (0: from now on) and with the existing locks first if existing.
func (h *harness) watchOpen(name, prefix string, startIndex uint64, existing bool) error {
	h.mu.Lock()
	for _, w := range h.watches {
		if w.name == name {
			h.mu.Unlock()
			return fmt.Errorf("watcher %q exists", name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &harnessWatch{name: name, prefix: prefix, cancel: cancel, done: make(chan error, 1)}
	h.watches = append(h.watches, w)
	h.mu.Unlock()
	req := &ticketv1.WatchRequest{Prefix: prefix, StartIndex: startIndex, IncludeExisting: existing}
	svc := &lockService{n: h.n}
	go func() {
		w.done <- svc.watch(ctx, req, func(m *ticketv1.WatchEvent) error { return h.watchReceived(w, m) })
	}()
	h.settle()
	return nil
}

// watchReceived records one message of w's stream (nil: the headers) and
// checks it against W1. Called from w's serving goroutine.
func (h *harness) watchReceived(w *harnessWatch, m *ticketv1.WatchEvent) error {
	if m == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case m.GetType() == ticketv1.WatchEvent_TYPE_STARTED:
		if w.started {
			h.check.violate("W1", "%s announced a second start %d after %d", w.name, m.GetIndex(), w.start)
		}
		w.started, w.start = true, m.GetIndex()
		w.lines = append(w.lines, fmt.Sprintf("%s <- started after %d", w.name, w.start))
	case m.GetExisting():
		if w.started {
			h.check.violate("W1", "%s got an existing lock %s after its start", w.name, m.GetKey())
		}
		w.lines = append(w.lines, fmt.Sprintf("%s <- existing %s token=%d @%d", w.name, m.GetKey(), m.GetToken(), m.GetIndex()))
	default:
		ev := watch.Event{Type: watch.Type(m.GetType()), Key: m.GetKey(), Token: m.GetToken(), Index: m.GetIndex()}
		w.lines = append(w.lines, fmt.Sprintf("%s <- %s %s token=%d @%d", w.name, ev.Type, ev.Key, ev.Token, ev.Index))
		if !w.started {
			h.check.violate("W1", "%s got %s %s @%d before its start was announced", w.name, ev.Type, ev.Key, ev.Index)
			return nil
		}
		want := h.watchExpected(w)
		if n := len(w.got); n >= len(want) || !sameChange(want[n], ev) {
			h.check.violate("W1", "%s got %s %s token=%d @%d, not the next change after %d (%s)",
				w.name, ev.Type, ev.Key, ev.Token, ev.Index, w.start, changesString(want))
		}
		w.got = append(w.got, ev)
	}
	return nil
}

// watchSettled prints what each watcher received since the last settle, in
// the order the watchers were opened (their streams run concurrently),
// checks that each started watcher has received every change after its
// start (W1: none missing), and records the streams that ended. Called once
// every goroutine is blocked.
func (h *harness) watchSettled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.watches {
		h.events = append(h.events, w.lines...)
		w.lines = nil
		if !w.ended {
			select {
			case err := <-w.done:
				w.ended = true
				h.event("%s ended: %v", w.name, err)
			default:
			}
		}
		if w.ended || !w.started {
			continue
		}
		if want := h.watchExpected(w); len(w.got) < len(want) {
			h.check.violate("W1", "%s missed %s after its start %d", w.name, changesString(want[len(w.got):]), w.start)
		}
	}
}

// watchClose ends every open watch (the harness's cleanup).
func (h *harness) watchClose() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.watches {
		w.cancel()
	}
}

// watchExpected is every applied change under w's prefix after w's
// announced start. h.mu held.
func (h *harness) watchExpected(w *harnessWatch) []watch.Event {
	var out []watch.Event
	for _, ev := range h.changes {
		if ev.Index > w.start && strings.HasPrefix(ev.Key, w.prefix) {
			out = append(out, ev)
		}
	}
	return out
}

// recordChanges appends the changes of an applied entry to h.changes.
// h.mu held.
func (h *harness) recordChanges(index uint64, cmd core.Command, res core.Result) {
	h.changes = watch.AppendEvents(h.changes, index, cmd, res)
}

// sameChange compares what W1 checks of a change: type, key, token, index.
func sameChange(a, b watch.Event) bool {
	return a.Type == b.Type && a.Key == b.Key && a.Token == b.Token && a.Index == b.Index
}

// changesString renders changes as "TYPE key@index" for a violation.
func changesString(evs []watch.Event) string {
	parts := make([]string, 0, len(evs))
	for _, ev := range evs {
		parts = append(parts, fmt.Sprintf("%s %s@%d", ev.Type, ev.Key, ev.Index))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
