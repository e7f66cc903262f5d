package transport

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestPartialMessagesShareOneBudget (docs/security.md#peer-transport-bounds):
// many streams each holding a large partial message, in either framing.
// With MaxMessageBytes 4 MiB and MaxBufferedBytes 12 MiB, eight streams
// that each declare a 4 MiB message and send 3.5 MiB of it cannot all be
// held: those that would go past the budget are ended (counted as
// "oversize"), at most the budget is held at once, and the others are
// still being read.
func TestPartialMessagesShareOneBudget(t *testing.T) {
	const (
		streams  = 8
		declared = 4 << 20
		sent     = 3<<20 + 512<<10
		budget   = 12 << 20
	)
	for _, framing := range framings {
		t.Run(framing, func(t *testing.T) {
			in := newInbox()
			counts := &errorCounts{kinds: map[string]int{}}
			tr, err := New(Config{
				NodeID: 2, ID: "b", Addr: "127.0.0.1:1", BindAddr: "127.0.0.1:0", Deliver: in.deliver,
				MaxMessageBytes: declared, MaxBufferedBytes: budget, CountError: counts.count,
			})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, tr.Close()) })

			ended := make(chan struct{}, streams)
			for range streams {
				s, err := openRawStream(t, tr.Addr().String(), 2, framing, nil)
				require.NoError(t, err)
				go func() {
					_, _ = s.w.Write(protowire.AppendVarint(nil, declared))
					_, _ = s.w.Write(bytes.Repeat([]byte{'x'}, sent))
					// Keep the stream open: only the receiver may end it.
				}()
				go func() {
					<-s.ended
					ended <- struct{}{}
				}()
			}
			// Each stream that fits holds 4 MiB (the buffer doubles up to
			// the declared length): three fit in 12 MiB, five must be ended.
			timeout := time.After(20 * time.Second)
			for range streams - budget/declared {
				select {
				case <-ended:
				case <-timeout:
					t.Fatalf("fewer than %d streams ended by the budget", streams-budget/declared)
				}
			}
			require.LessOrEqual(t, tr.budget.Load(), int64(budget), "bytes held past the budget")
			require.GreaterOrEqual(t, counts.get("oversize"), streams-budget/declared)
		})
	}
}
