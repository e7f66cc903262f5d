package sdk_test

import (
	"context"
	"fmt"
	"net/http"
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

// announcingWatch is a node below the SDK that serves Watch from entryLog as
// a server does: the existing lock s/9 (include_existing, read at the start),
// a STARTED event with the index the stream starts after, then the changes
// after it. Its first stream starts "now" at 9 and is cut right after the
// announcement, before any change; entry 10 applies meanwhile, so a later
// stream from "now" starts at 10. It records each request.
type announcingWatch struct {
	ticketv1connect.UnimplementedLockServiceHandler

	mu   sync.Mutex
	reqs []string
}

func (s *announcingWatch) Watch(ctx context.Context, req *ticketv1.WatchRequest, stream *connect.ServerStream[ticketv1.WatchEvent]) error {
	s.mu.Lock()
	call := len(s.reqs)
	s.reqs = append(s.reqs, fmt.Sprintf("start=%d existing=%t", req.GetStartIndex(), req.GetIncludeExisting()))
	s.mu.Unlock()
	now := uint64(9)
	if call > 0 {
		now = 10
	}
	after := now
	if req.GetStartIndex() > 0 && !req.GetIncludeExisting() {
		after = req.GetStartIndex() - 1
	}
	if req.GetIncludeExisting() {
		if err := stream.Send(&ticketv1.WatchEvent{Type: ticketv1.WatchEvent_TYPE_GRANTED, Key: "s/9", Token: 9, Index: now, Existing: true}); err != nil {
			return err
		}
	}
	if err := stream.Send(&ticketv1.WatchEvent{Type: ticketv1.WatchEvent_TYPE_STARTED, Index: after}); err != nil {
		return err
	}
	if call == 0 {
		panic(http.ErrAbortHandler) // cut, as a dying node's stream
	}
	for _, ev := range entryLog {
		if ev.GetIndex() > after {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
	<-ctx.Done()
	return nil
}

func (s *announcingWatch) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// TestWatchStartedAndResumedFromIt: WithStartedEvents yields the server's
// announcement as an EventStarted before any change (once: not again when
// the watch resumes), and a stream cut after the announcement but before
// its first change resumes right after the announced index, not "from now"
// (which would skip entry 10, applied in between); a complete listing is
// not asked for again. Without WithStartedEvents the watch yields changes
// only.
func TestWatchStartedAndResumedFromIt(t *testing.T) {
	t.Parallel()
	changes := []string{"10 RELEASED s/0", "10 RELEASED s/1", "10 RELEASED s/2", "10 RELEASED s/3", "11 GRANTED s/0"}
	cases := []struct {
		name string
		opts []sdk.WatchOption
		want []string
		reqs []string
	}{
		{name: "started_events", opts: []sdk.WatchOption{sdk.WithStartedEvents()},
			want: append([]string{"9 STARTED "}, changes...), reqs: []string{"start=0 existing=false", "start=10 existing=false"}},
		{name: "changes_only", opts: nil,
			want: changes, reqs: []string{"start=0 existing=false", "start=10 existing=false"}},
		{name: "existing_then_started", opts: []sdk.WatchOption{sdk.WithStartedEvents(), sdk.WithExisting()},
			want: append([]string{"9 GRANTED s/9", "9 STARTED "}, changes...), reqs: []string{"start=0 existing=true", "start=10 existing=false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			node := &announcingWatch{}
			cl := lockServiceClient(t, node)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var got []string
			for ev, err := range cl.Watch(ctx, "s/", c.opts...) {
				require.NoError(t, err, "got %v, requests %v", got, node.requests())
				got = append(got, fmt.Sprintf("%d %s %s", ev.Index, ev.Type, ev.Key))
				if len(got) == len(c.want) || ev.Index == 11 {
					break
				}
			}
			assert.Equal(t, c.want, got, "the start first, then every change after it once")
			assert.Equal(t, c.reqs, node.requests())
		})
	}
}
