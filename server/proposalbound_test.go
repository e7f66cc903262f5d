package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProposalBoundsShareAWindow: detached proposals that start within one
// window share one bound, which ends timeout after the window began (so
// between timeout − window and timeout after each start) or with the
// node's life; a later window gets a bound of its own, and a bound ends on
// its own deadline, never because another proposal of its window returned.
func TestProposalBoundsShareAWindow(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	defer stop()
	var b proposalBounds
	const timeout = 2 * time.Second
	start := time.Now()
	first := b.get(life, timeout)
	second := b.get(life, timeout)
	require.Same(t, first, second, "two proposals of one window share a bound")
	dl, ok := first.Deadline()
	require.True(t, ok)
	assert.WithinRange(t, dl, start.Add(timeout-timeout/boundWindows), time.Now().Add(timeout))

	var later context.Context
	require.Eventually(t, func() bool { later = b.get(life, timeout); return later != first }, 10*time.Second, time.Millisecond,
		"a window of %v ends", timeout/boundWindows)
	ldl, _ := later.Deadline()
	assert.True(t, ldl.After(dl), "the later window's bound ends later")
	assert.NoError(t, first.Err(), "a window's bound ends only at its deadline")

	var short context.Context // a later window's, with a timeout as short as tests use
	require.Eventually(t, func() bool { short = b.get(life, time.Millisecond); return short != later }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return short.Err() != nil }, 10*time.Second, time.Millisecond)
	assert.ErrorIs(t, short.Err(), context.DeadlineExceeded)

	stop()
	assert.ErrorIs(t, later.Err(), context.Canceled, "the node's life ends every bound")
}

// BenchmarkDetachedBound is what bounding one detached proposal costs:
// a context.WithTimeout of its own, cancelled when it returns ("own"), as
// a Grant and a KeepAlive round had, and the window's shared bound
// ("shared").
func BenchmarkDetachedBound(b *testing.B) {
	life, stop := context.WithCancel(context.Background())
	defer stop()
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(life, proposeTimeout)
			_ = ctx.Done()
			cancel()
		}
	})
	b.Run("shared", func(b *testing.B) {
		var bounds proposalBounds
		b.ReportAllocs()
		for b.Loop() {
			_ = bounds.get(life, proposeTimeout).Done()
		}
	})
}
