package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestPartialMessagesShareOneBudget (docs/security.md#peer-transport-bounds):
// many streams each holding a large partial message. With MaxMessageBytes
// 4 MiB and MaxBufferedBytes 12 MiB, eight streams that each declare a
// 4 MiB message and send 3.5 MiB of it cannot all be held: those that would
// go past the budget are ended (counted as "oversize"), at most the budget
// is held at once, and the others are still being read.
func TestPartialMessagesShareOneBudget(t *testing.T) {
	const (
		streams  = 8
		declared = 4 << 20
		sent     = 3<<20 + 512<<10
		budget   = 12 << 20
	)
	in := newInbox()
	counts := &errorCounts{kinds: map[string]int{}}
	tr, err := New(Config{
		NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver,
		MaxMessageBytes: declared, MaxBufferedBytes: budget, CountError: counts.count,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tr.Close()) })

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	rt := &http.Transport{Protocols: &h2c}
	defer rt.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ended := make(chan struct{}, streams)
	var wg sync.WaitGroup
	var pws []*io.PipeWriter
	for range streams {
		pr, pw := io.Pipe()
		pws = append(pws, pw)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+tr.Addr().String()+StreamPath, pr)
		require.NoError(t, err)
		req.Header.Set(headerTo, strconv.Itoa(2))
		resp, err := rt.RoundTrip(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = pw.Write(protowire.AppendVarint(nil, declared))
			_, _ = pw.Write(bytes.Repeat([]byte{'x'}, sent))
			// Keep the body open: only the receiver may end the stream.
		}()
		go func() {
			defer wg.Done()
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			if ctx.Err() == nil {
				ended <- struct{}{}
			}
		}()
	}
	// Each stream that fits holds 4 MiB (the buffer doubles up to the
	// declared length): three fit in 12 MiB, five must be ended.
	for range streams - budget/declared {
		select {
		case <-ended:
		case <-ctx.Done():
			t.Fatalf("fewer than %d streams ended by the budget", streams-budget/declared)
		}
	}
	require.LessOrEqual(t, tr.budget.Load(), int64(budget), "bytes held past the budget")
	require.GreaterOrEqual(t, counts.get("oversize"), streams-budget/declared)
	cancel()
	for _, pw := range pws {
		_ = pw.Close()
	}
	wg.Wait()
}
