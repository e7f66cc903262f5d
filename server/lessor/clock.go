package lessor

import "time"

// Clock is the lessor's source of time. Deadlines are measured with Now's
// monotonic reading (time.Time carries one), never wall time, so a clock step
// on the host never ends a lease early. Tests inject a fake clock to move time
// by hand.
type Clock interface {
	// Now returns the current time with a monotonic reading.
	Now() time.Time
	// NewTimer returns a timer that fires once, after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the lessor uses.
type Timer interface {
	// C is the channel the time is sent on when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
}

// RealClock returns the system clock (time.Now, time.NewTimer).
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// mono is a time on the lessor's Clock as nanoseconds since Lessor.base:
// the 8 bytes every tracked lease keeps per deadline, where a time.Time
// takes 24. Differences of monos are those of the times they came from
// (time.Time.Sub: monotonic readings when both have them, as Clock.Now's
// do), for about 292 years either side of base.
type mono int64

// mono is t as a mono.
func (l *Lessor) mono(t time.Time) mono { return mono(t.Sub(l.base)) }

// at is m as a time on the Clock.
func (l *Lessor) at(m mono) time.Time { return l.base.Add(time.Duration(m)) }
