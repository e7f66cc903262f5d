package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/sdk"
)

// Writers of the graceful transfer's background load.
const (
	// transferWriters is how many goroutines write through the transfer,
	// each an Acquire then a Release of a fresh key, one after the other.
	transferWriters = 4
	// transferWriteTimeout bounds each of their calls: the SDK retries
	// within it (following the new leader's hint), so an error is what an
	// application with this deadline would see.
	transferWriteTimeout = 5 * time.Second
)

// transferResult is one graceful transfer of leadership under writes.
type transferResult struct {
	// Took is the TransferLeader call → the first write acknowledged after
	// it returned (committed by the new leader: the old one knew it had
	// stepped down when the call returned).
	Took time.Duration
	// Writes are the writers' acknowledged calls from their start until
	// 2 × transferWriters more after the first write; Refused the calls that returned an error to the writer
	// (after the SDK's own retries); Retried the attempts that failed and
	// (of every call, refused or not: most are hidden from the writer by
	// the SDK's retries).
	Writes, Refused, Retried int
	// FirstRefusal is the first refused call's error, for the log.
	FirstRefusal string
}

// transfer asks the leader to hand leadership to any up-to-date voter
// (TransferLeader, as `ticketctl transfer-leader` does: Raft thesis §3.10)
// while transferWriters write, and times the call → the first write
// acknowledged after it returned (key, through the cluster's client).
// Errors: the cluster did not settle, the transfer failed or kept the same
// leader, no write within WriteTimeout, ctx's error.
func (s *scaler) transfer(ctx context.Context, key string) (transferResult, error) {
	leader, err := s.settle(ctx)
	if err != nil {
		return transferResult{}, err
	}
	w, err := s.startWriters(ctx, key)
	if err != nil {
		return transferResult{}, err
	}
	res, err := s.transferOnce(ctx, key, leader, w)
	if err == nil {
		// Writes in flight at the transfer end after the first write: the
		// writers complete 2 × transferWriters more before the counts are
		// read.
		err = w.waitWrites(ctx, w.writes.Load()+2*transferWriters, s.cfg.WriteTimeout)
	}
	res.Writes, res.Refused, res.Retried, res.FirstRefusal = w.stop()
	if err == nil {
		s.cfg.logf("%s: transfer-leader → first write %v; %d writes through it, %d refused, %d attempts retried by the SDK",
			s.cfg.Backend, res.Took.Round(time.Millisecond), res.Writes, res.Refused, res.Retried)
		if res.FirstRefusal != "" {
			s.cfg.logf("%s: first refused write: %s", s.cfg.Backend, res.FirstRefusal)
		}
	}
	return res, err
}

// transferOnce waits for the writers' first acknowledged write, then
// transfers leadership from node leader and times the first write after.
func (s *scaler) transferOnce(ctx context.Context, key string, leader int, w *writers) (transferResult, error) {
	if err := w.waitFirst(ctx, s.cfg.WriteTimeout); err != nil {
		return transferResult{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	start := time.Now()
	to, err := s.c.Client().TransferLeader(tctx, "")
	if err != nil {
		return transferResult{}, fmt.Errorf("TransferLeader: %w", err)
	}
	if from := s.c.Nodes()[leader].ID; to == "" || to == from {
		return transferResult{}, fmt.Errorf("TransferLeader from %s answered leader %q", from, to)
	}
	took, err := s.c.FirstWrite(ctx, key, start, s.cfg.WriteTimeout)
	if err != nil {
		return transferResult{}, err
	}
	return transferResult{Took: took}, nil
}

// writers is the background load of a transfer: their own SDK client, so
// that an interceptor counts only their failed attempts.
type writers struct {
	client          *sdk.Client
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	writes, refused atomic.Int64
	retried         atomic.Int64
	first           chan struct{} // closed at the first acknowledged write
	firstOnce       sync.Once
	mu              sync.Mutex
	firstRefusal    string
}

// startWriters starts transferWriters goroutines writing keys under
// prefix until stop.
func (s *scaler) startWriters(ctx context.Context, prefix string) (*writers, error) {
	w := &writers{first: make(chan struct{})}
	var endpoints []string
	for _, n := range s.c.Nodes() {
		endpoints = append(endpoints, n.APIAddr)
	}
	client, err := sdk.New(endpoints, sdk.WithConnectOptions(connect.WithInterceptors(w.countFailures())))
	if err != nil {
		return nil, fmt.Errorf("writers' sdk client: %w", err)
	}
	w.client = client
	ctx, w.cancel = context.WithCancel(ctx)
	for i := range transferWriters {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.write(ctx, fmt.Sprintf("%s/w%d", prefix, i))
		}()
	}
	return w, nil
}

// countFailures counts every failed Acquire or Release attempt of the
// writers' client (a timed-out attempt included, a cancelled one not: the
// writers were stopped): each one the SDK retried or returned as refused.
func (w *writers) countFailures() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			p := req.Spec().Procedure
			if err != nil && connect.CodeOf(err) != connect.CodeCanceled && (strings.HasSuffix(p, "/Acquire") || strings.HasSuffix(p, "/Release")) {
				w.retried.Add(1)
			}
			return res, err
		}
	}
}

// write acquires and releases fresh keys under prefix until ctx ends.
func (w *writers) write(ctx context.Context, prefix string) {
	for i := 0; ctx.Err() == nil; i++ {
		cctx, cancel := context.WithTimeout(ctx, transferWriteTimeout)
		g, err := w.client.Acquire(cctx, fmt.Sprintf("%s/%d", prefix, i), time.Minute)
		if err == nil {
			err = w.client.Release(cctx, g.Key, g.Token)
		}
		cancel()
		switch {
		case ctx.Err() != nil:
			return // stopped: the call's end is not the cluster's doing
		case err != nil:
			w.refused.Add(1)
			w.mu.Lock()
			if w.firstRefusal == "" {
				w.firstRefusal = err.Error()
			}
			w.mu.Unlock()
		default:
			w.writes.Add(1)
			w.firstOnce.Do(func() { close(w.first) })
		}
	}
}

// waitFirst waits for the writers' first acknowledged write. Errors: none
// within timeout, ctx's error.
func (w *writers) waitFirst(ctx context.Context, timeout time.Duration) error {
	select {
	case <-w.first:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return errors.New("the writers had no write acknowledged before the transfer")
	}
}

// waitWrites waits until the writers have n acknowledged writes in all.
// Errors: not within timeout, ctx's error.
func (w *writers) waitWrites(ctx context.Context, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for w.writes.Load() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("the writers had %d of %d writes acknowledged within %v of the transfer", w.writes.Load(), n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// stop ends the writers, closes their client and returns their counts
// (retried counts the failed attempts of refused calls too).
func (w *writers) stop() (writes, refused, retried int, firstRefusal string) {
	w.cancel()
	w.wg.Wait()
	_ = w.client.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.writes.Load()), int(w.refused.Load()), int(w.retried.Load()), w.firstRefusal
}
