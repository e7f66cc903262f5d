package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Line is a progress line. Safe for concurrent use.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	total int
	done  int // steps begun before the current one
	start time.Time
	now   func() time.Time
	last  string
}

// New returns a Line writing to w for total steps. The line is rewritten in
// place when w is a terminal (a character device).
func New(w io.Writer, total int) *Line {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &Line{w: w, tty: tty, total: total, done: -1, start: time.Now(), now: time.Now}
}

// Step reports that the next step, described by what, begins.
func (l *Line) Step(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
	l.print(what)
}

// Skip counts n steps as done without running them (a part that failed or
// was skipped), so the step count and the estimate stay right.
func (l *Line) Skip(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += n
}

// Note prints what without counting a step (e.g. a skipped part).
func (l *Line) Note(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tty {
		fmt.Fprintf(l.w, "\r\x1b[K%s\n", what)
		if l.last != "" {
			fmt.Fprint(l.w, l.last)
		}
		return
	}
	fmt.Fprintln(l.w, what)
}

// Done ends the line with the total time taken.
func (l *Line) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	elapsed := l.now().Sub(l.start).Round(time.Second)
	if l.tty {
		fmt.Fprintf(l.w, "\r\x1b[Kdone: %d steps in %s\n", l.total, elapsed)
		return
	}
	fmt.Fprintf(l.w, "done: %d steps in %s\n", l.total, elapsed)
}

func (l *Line) print(what string) {
	elapsed := l.now().Sub(l.start)
	eta := "?"
	if l.done > 0 {
		left := time.Duration(float64(elapsed) / float64(l.done) * float64(l.total-l.done))
		eta = "~" + left.Round(time.Second).String()
	}
	line := fmt.Sprintf("[%d/%d] %s · elapsed %s · left %s", l.done+1, l.total, what, elapsed.Round(time.Second), eta)
	if l.tty {
		l.last = "\r\x1b[K" + line
		fmt.Fprint(l.w, l.last)
		return
	}
	fmt.Fprintln(l.w, line)
}
