package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// entryLog is a watch history in which one entry (index 10, a session's
// end) made four events and the next (11) one: what every node would send,
// in the same order.
var entryLog = []*ticketv1.WatchEvent{
	{Type: ticketv1.WatchEvent_TYPE_RELEASED, Key: "s/0", Token: 1, Session: 3, Index: 10},
	{Type: ticketv1.WatchEvent_TYPE_RELEASED, Key: "s/1", Token: 2, Session: 3, Index: 10},
	{Type: ticketv1.WatchEvent_TYPE_RELEASED, Key: "s/2", Token: 3, Session: 3, Index: 10},
	{Type: ticketv1.WatchEvent_TYPE_RELEASED, Key: "s/3", Token: 4, Session: 3, Index: 10},
	{Type: ticketv1.WatchEvent_TYPE_GRANTED, Key: "s/0", Token: 5, Owner: "o", Index: 11},
}

// scriptedWatch is a node below the SDK that serves Watch from entryLog:
// its i-th stream (0-based) runs script[i], which gets the events at or
// after the request's start index and ends the stream its way; streams past
// the script send everything and stay open. It records each start index.
type scriptedWatch struct {
	ticketv1connect.UnimplementedLockServiceHandler
	script []func(evs []*ticketv1.WatchEvent, send func(*ticketv1.WatchEvent) error) error

	mu     sync.Mutex
	starts []uint64
}

func (s *scriptedWatch) Watch(ctx context.Context, req *ticketv1.WatchRequest, stream *connect.ServerStream[ticketv1.WatchEvent]) error {
	s.mu.Lock()
	call := len(s.starts)
	s.starts = append(s.starts, req.GetStartIndex())
	s.mu.Unlock()
	var evs []*ticketv1.WatchEvent
	for _, ev := range entryLog {
		if ev.GetIndex() >= req.GetStartIndex() {
			evs = append(evs, ev)
		}
	}
	if call < len(s.script) {
		return s.script[call](evs, stream.Send)
	}
	for _, ev := range evs {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

func (s *scriptedWatch) startIndexes() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.starts...)
}

// sendThen sends the first n events, then ends the stream with end's
// result: an error status from the server, or a cut (end panics with
// http.ErrAbortHandler, which resets the stream as a dying node would).
func sendThen(n int, end func() error) func([]*ticketv1.WatchEvent, func(*ticketv1.WatchEvent) error) error {
	return func(evs []*ticketv1.WatchEvent, send func(*ticketv1.WatchEvent) error) error {
		for _, ev := range evs[:min(n, len(evs))] {
			if err := send(ev); err != nil {
				return err
			}
		}
		return end()
	}
}

func cut() error { panic(http.ErrAbortHandler) }

func tooSlow() error {
	return connect.NewError(connect.CodeResourceExhausted, errors.New("watcher too slow; resume from the last index"))
}

// TestWatchResumesInsideAnEntry: a stream that ends inside an entry (cut)
// resumes at that entry's index and skips the events already yielded; one
// the server ended itself ended between entries and resumes after it; a
// stream that ended before sending a change does not move the resume point.
// Every event is yielded once, in order.
func TestWatchResumesInsideAnEntry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script []func([]*ticketv1.WatchEvent, func(*ticketv1.WatchEvent) error) error
		starts []uint64
	}{
		{name: "cut_inside_entry", script: []func([]*ticketv1.WatchEvent, func(*ticketv1.WatchEvent) error) error{
			sendThen(2, cut),
		}, starts: []uint64{10, 10}},
		{name: "cut_twice_inside_entry", script: []func([]*ticketv1.WatchEvent, func(*ticketv1.WatchEvent) error) error{
			sendThen(1, cut), sendThen(3, cut),
		}, starts: []uint64{10, 10, 10}},
		{name: "server_ended_after_entry", script: []func([]*ticketv1.WatchEvent, func(*ticketv1.WatchEvent) error) error{
			sendThen(4, tooSlow),
		}, starts: []uint64{10, 11}},
		{name: "cut_then_refused_before_any_change", script: []func([]*ticketv1.WatchEvent, func(*ticketv1.WatchEvent) error) error{
			sendThen(2, cut), sendThen(0, tooSlow),
		}, starts: []uint64{10, 10, 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			node := &scriptedWatch{script: c.script}
			cl := lockServiceClient(t, node)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var got []string
			for ev, err := range cl.Watch(ctx, "s/", sdk.WithStartIndex(10), sdk.WithStaleWatch()) {
				require.NoError(t, err, "got %v, starts %v", got, node.startIndexes())
				got = append(got, fmt.Sprintf("%d %s %s %d", ev.Index, ev.Type, ev.Key, ev.Token))
				if len(got) == len(entryLog) {
					break
				}
			}
			assert.Equal(t, []string{
				"10 RELEASED s/0 1", "10 RELEASED s/1 2", "10 RELEASED s/2 3", "10 RELEASED s/3 4", "11 GRANTED s/0 5",
			}, got, "every event once, in order")
			assert.Equal(t, c.starts, node.startIndexes())
		})
	}
}

// lockServiceClient serves h as the LockService of an h2c test server (closed
// at the end of the test) and returns a client of it with a back-off of
// 1–5 ms, so that a watch resumes at once.
func lockServiceClient(t *testing.T, h ticketv1connect.LockServiceHandler) *sdk.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(h))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Config.ErrorLog = nil
	srv.Start()
	t.Cleanup(srv.Close)
	cl, err := sdk.New([]string{srv.Listener.Addr().String()}, sdk.WithBackoff(time.Millisecond, 5*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}
