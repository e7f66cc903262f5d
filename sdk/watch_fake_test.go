package sdk_test

import (
	"context"
	"sort"
	"strings"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Watch serves the fake cluster's change log on any node, as every ticketd
// node serves watches (docs/api.md#watch): with include_existing the locks
// held under the prefix first (existing, at the last index), then STARTED
// with the index the stream starts after, then every change under the
// prefix from there on, as it is made, until the client ends the stream.
// The fake retains its whole log, so it never answers OutOfRange; the
// SDK's resuming is tested against scripted nodes (watch_resume_test.go)
// and real ones (server/e2e/watch_test.go).
func (n *fakeNode) Watch(ctx context.Context, req *ticketv1.WatchRequest, stream *connect.ServerStream[ticketv1.WatchEvent]) error {
	c := n.c
	prefix := req.GetPrefix()
	c.mu.Lock()
	c.calls = append(c.calls, fakeCall{node: n.idx, method: "Watch"})
	from := req.GetStartIndex() // the first index sent
	if from == 0 || req.GetIncludeExisting() {
		from = c.index + 1
	}
	var first []*ticketv1.WatchEvent
	if req.GetIncludeExisting() {
		first = c.existingLocked(prefix)
	}
	first = append(first, &ticketv1.WatchEvent{Type: ticketv1.WatchEvent_TYPE_STARTED, Index: from - 1})
	next := sort.Search(len(c.events), func(i int) bool { return c.events[i].GetIndex() >= from })
	c.mu.Unlock()
	for _, ev := range first {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	for {
		c.mu.Lock()
		evs := c.events[next:]
		next = len(c.events)
		changed := c.changed
		c.mu.Unlock()
		for _, ev := range evs {
			if !strings.HasPrefix(ev.GetKey(), prefix) {
				continue
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// existingLocked returns the held locks under prefix as existing GRANTED
// events at the last index, in key and token order.
func (c *fakeCluster) existingLocked(prefix string) []*ticketv1.WatchEvent {
	var keys []string
	for k := range c.locks {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var evs []*ticketv1.WatchEvent
	for _, k := range keys {
		l := c.locks[k]
		for _, h := range l.GetHolders() {
			ev := fakeEvent(ticketv1.WatchEvent_TYPE_GRANTED, l, h)
			ev.Index, ev.Existing = c.index, true
			evs = append(evs, ev)
		}
	}
	return evs
}
