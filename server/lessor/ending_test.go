package lessor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ticketd/ticketd/core"
)

// TestEndingAnswersEveryRemoval: Ending is true for a holder whose own lease
// ran out, a ghost whose Release is in flight, and every holder under a
// session whose lease ran out or whose CloseSession is in flight; the marks
// end with the removal, the last CloseSession, or a leadership change. The
// lessor is not primary, so nothing is expired under the test's feet.
func TestEndingAnswersEveryRemoval(t *testing.T) {
	h := newHarness(t)
	a := h.grant("a", 10_000)
	b := h.grant("b", 1000)
	assert.False(t, h.l.Ending("a", a, 0))

	h.l.MarkGhost("a", a)
	assert.True(t, h.l.Ghost("a", a))
	assert.True(t, h.l.Ending("a", a, 0), "a ghost whose Release is in flight")
	assert.False(t, h.l.Ending("b", b, 0), "only the ghost itself")
	h.l.Removed("a", a) // its Release applied
	assert.False(t, h.l.Ghost("a", a), "the removal clears the mark")

	c := h.grant("c", 10_000)
	h.l.MarkGhost("c", c)
	h.l.ForgetGhosts()
	assert.False(t, h.l.Ending("c", c, 0), "a leadership change forgets the marks")

	id := h.createSession(10_000)
	d := h.grantUnder(core.Grant("d", 0, "o"), id)
	assert.False(t, h.l.Ending("d", d, id))
	h.l.MarkClosing(id)
	h.l.MarkClosing(id)
	assert.True(t, h.l.Closing(id))
	assert.True(t, h.l.Ending("d", d, id), "its session's CloseSession is in flight")
	h.l.UnmarkClosing(id)
	assert.True(t, h.l.Ending("d", d, id), "marks nest: another CloseSession is still in flight")
	h.l.UnmarkClosing(id)
	assert.False(t, h.l.Closing(id))
	assert.False(t, h.l.Ending("d", d, id))

	h.clock.Advance(1000 * time.Millisecond)
	assert.True(t, h.l.Ending("b", b, 0), "its lease ran out")
	assert.False(t, h.l.Ending("c", c, 0))
	short := h.createSession(500)
	e := h.grantUnder(core.Grant("e", 0, "o"), short)
	assert.False(t, h.l.Ending("e", e, short))
	h.clock.Advance(500 * time.Millisecond)
	assert.True(t, h.l.Ending("e", e, short), "its session's lease ran out")
	assert.False(t, h.l.Ending("d", d, id))
}
