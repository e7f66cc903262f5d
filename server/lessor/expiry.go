package lessor

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// run is the expiry loop: it sleeps until the earliest deadline (primary
// only) or lock-delay end, marks every lease past its deadline expiring and
// hands them to an expiry worker, and reports ended lock-delays.
func (l *Lessor) run() {
	defer l.wg.Done()
	for {
		batch, epoch, ended, wait := l.collect()
		if len(batch) > 0 {
			l.wg.Add(1)
			go l.expire(epoch, batch)
		}
		if l.cfg.OnDelayEnd != nil {
			for _, key := range ended {
				l.cfg.OnDelayEnd(key)
			}
		}
		var timerC <-chan time.Time
		var timer Timer
		if wait >= 0 {
			timer = l.cfg.Clock.NewTimer(wait)
			timerC = timer.C()
		}
		select {
		case <-timerC:
		case <-l.wake:
		case <-l.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// collect pops every lease past its deadline (primary only), marking it
// expiring, drops ended lock-delays, and returns them with the epoch and the
// wait until the next deadline or delay end (-1: none).
func (l *Lessor) collect() ([]leaseID, uint64, []string, time.Duration) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Time
	ended := l.endDelays(now, &next)
	var batch []leaseID
	if l.primary {
		for len(l.due) > 0 && l.mono(now) >= l.due[0].due {
			it := heap.Pop(&l.due).(*item)
			l.mark(it)
			batch = append(batch, it.id)
		}
		if len(l.due) > 0 && (next.IsZero() || l.at(l.due[0].due).Before(next)) {
			next = l.at(l.due[0].due)
		}
	}
	if next.IsZero() {
		return batch, l.epoch, ended, -1
	}
	return batch, l.epoch, ended, next.Sub(now)
}

// expire confirms leadership once for the batch, then proposes its Expires
// concurrently (they share group commits; docs/design.md#the-consensus-contract)
// through at most Config.MaxInFlight workers across all rounds:
// core.ExpireSeen for a lock's own lease, core.ExpireSession for a
// session's. Each command names one lease and its seen index, so they are
// not merged into one entry: that would take a new command version
// (docs/design.md#replicated-commands) for no fewer syncs than group commit
// already gives. A round whose epoch ended, or whose confirmation names
// another term than the epoch's, proposes nothing (docs/design.md#leases); each
// Expire is decided again under the lessor's lock just before it is proposed
// (decide), with the seen index of the lock's last Grant/Renew this node
// applied. Failures are retried after RetryInterval while the epoch lasts;
// the leases stay expiring meanwhile.
func (l *Lessor) expire(epoch uint64, batch []leaseID) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.ProposeTimeout)
	defer cancel()
	term, err := l.cfg.Confirm(ctx)
	if err != nil {
		l.log.Debug("lessor: confirm before expiry failed", zap.Int("leases", len(batch)), zap.Error(err))
		l.retry(epoch, batch)
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []leaseID
	for i, d := range batch {
		if !l.acquireSlot(ctx) {
			// The round's time ran out before a worker was free: the rest
			// are proposed by a later round.
			mu.Lock()
			failed = append(failed, batch[i:]...)
			mu.Unlock()
			break
		}
		seen, ok := l.decide(epoch, term, d)
		if !ok {
			<-l.slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-l.slots }()
			var err error
			if d.session() != 0 {
				err = l.cfg.ExpireSession(ctx, d.session(), seen)
			} else {
				err = l.cfg.Expire(ctx, d.key, d.token, seen)
			}
			l.settle(epoch, d, err)
			if err != nil {
				l.log.Debug("lessor: expire proposal failed", zap.String("key", d.key), zap.Uint64("token", d.lockToken()),
					zap.Uint64("session", d.session()), zap.Error(err))
				mu.Lock()
				failed = append(failed, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		l.retry(epoch, failed)
	}
}

// acquireSlot takes one of the Config.MaxInFlight proposal slots, waiting
// for a free one; false when ctx ends first.
func (l *Lessor) acquireSlot(ctx context.Context) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// decide reports, under the lessor's lock, whether the Expire of d may be
// proposed now, and with which seen index: the round's epoch is the current
// one, its confirmation confirmed this epoch's term, and the lease is still
// tracked, marked expiring and past its current deadline. If so the lease is
// marked proposing until settle: whatever epoch the proposal ends up
// committing in, no renewal or retry is admitted meanwhile.
func (l *Lessor) decide(epoch, term uint64, d leaseID) (uint64, bool) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	it, ok := l.items.get(d)
	if l.closed || !l.primary || l.epoch != epoch || l.term != term ||
		!ok || !it.expiring || l.mono(now) < it.deadline {
		return 0, false
	}
	l.proposing[d]++
	return it.seen, true
}

// settle ends the proposing mark of d after its Expire returned with err. A
// failed proposal of an older epoch re-arms the lock in the current epoch at
// once if Promote kept it expiring because of this proposal: its lease ended
// by the measure of the last renewal anyone acknowledged, since none was
// applied after the decision (a Track would have unmarked it).
func (l *Lessor) settle(epoch uint64, d leaseID, err error) {
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proposing[d]--; l.proposing[d] <= 0 {
		delete(l.proposing, d)
	}
	if err == nil || l.epoch == epoch || !l.primary || l.proposing[d] > 0 {
		return
	}
	if it, ok := l.items.get(d); ok && it.expiring && it.index < 0 {
		it.due = l.mono(now)
		l.enqueue(it)
		l.kick()
	}
}

// retry re-arms the still-tracked, still-expiring leases of batch for another
// expiry attempt after RetryInterval, if the epoch is unchanged. They stay
// marked expiring meanwhile (never renewed).
func (l *Lessor) retry(epoch uint64, batch []leaseID) {
	if l.ctx.Err() != nil {
		return
	}
	deadline := l.cfg.Clock.Now().Add(l.cfg.RetryInterval)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch != epoch || !l.primary {
		return
	}
	for _, d := range batch {
		it, ok := l.items.get(d)
		if !ok || !it.expiring || it.index >= 0 {
			continue
		}
		it.due = l.mono(deadline)
		l.enqueue(it)
	}
	l.kick()
}

// enqueue puts it in the deadline heap or fixes its place; l.mu held.
func (l *Lessor) enqueue(it *item) {
	if it.index >= 0 {
		heap.Fix(&l.due, int(it.index))
		return
	}
	heap.Push(&l.due, it)
}

// unqueue takes it out of the deadline heap if it is there; l.mu held.
func (l *Lessor) unqueue(it *item) {
	if it.index >= 0 {
		heap.Remove(&l.due, int(it.index))
	}
}

// deadlineHeap is a min-heap of items by due time (container/heap).
type deadlineHeap []*item

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *deadlineHeap) Push(x any) {
	it := x.(*item)
	it.index = int32(len(*h))
	*h = append(*h, it)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	it.index = -1
	*h = old[:n-1]
	return it
}
