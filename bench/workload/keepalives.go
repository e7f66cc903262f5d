package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"

	"github.com/ticketd/ticketd/bench/load"
)

// setupParallel bounds the setup calls in flight (sessions opened, locks
// taken) so that a level of 256 sessions is ready in a few seconds without
// flooding the cluster before the measurement.
const setupParallel = 16

// KeepAlives opens, for each of workers workers, a session (CreateSession,
// TTL LeaseMS) and acquires keys locks under it, "bench/<prefix>/keepalive/
// w<i>/k<j>", none of it timed; it returns an Op that keeps worker w's
// session alive once per call through the SDK (sdk.Client.KeepAlive: one
// message on the session's KeepAliveStream, served as one KeepAlive, whose
// Raft entry renews the session and every lock held under it), and a
// function that closes every session opened (releasing its locks). client
// (the setup's) and keeper should reach the leader, as etcd's client in
// bench/etcdpeer does. Errors: the first failed setup call's, wrapped (the
// sessions opened so far are then closed); of the Op: the keep-alive's
// wrapped with the session, or ErrUnexpected for a keep-alive that reports
// no TTL.
func KeepAlives(ctx context.Context, client ticketv1connect.LockServiceClient, keeper *sdk.Client, workers, keys int, prefix string) (load.Op, func(context.Context) error, error) {
	sessions := make([]uint64, workers)
	closeAll := func(ctx context.Context) error {
		var errs []error
		for _, s := range sessions {
			if s == 0 {
				continue
			}
			if _, err := client.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: s}); err != nil {
				errs = append(errs, fmt.Errorf("close session %d: %w", s, err))
			}
		}
		return errors.Join(errs...)
	}
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, setupParallel)
		errMu sync.Mutex
		first error
	)
	for i := range sessions {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := openSession(ctx, client, &sessions[i], keys, fmt.Sprintf("bench/%s/keepalive/w%d", prefix, i)); err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		_ = closeAll(context.WithoutCancel(ctx))
		return nil, nil, first
	}
	return func(ctx context.Context, w int) error {
		ttl, err := keeper.KeepAlive(ctx, sessions[w])
		if err != nil {
			return fmt.Errorf("keep-alive session %d: %w", sessions[w], err)
		}
		if ttl <= 0 {
			return fmt.Errorf("%w: keep-alive session %d: ttl %v", ErrUnexpected, sessions[w], ttl)
		}
		return nil
	}, closeAll, nil
}

// openSession creates a session into *id and acquires keys locks
// "<base>/k<j>" under it, as owner "ticketbench-<base>", each call retried
// through an election (retrySetup; a repeated CreateSession may leave an
// unused session behind, which expires).
func openSession(ctx context.Context, client ticketv1connect.LockServiceClient, id *uint64, keys int, base string) error {
	var s *ticketv1.CreateSessionResponse
	err := retrySetup(ctx, func() (err error) {
		s, err = client.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: LeaseMS})
		return err
	})
	if err != nil {
		return fmt.Errorf("create session for %s: %w", base, err)
	}
	*id = s.GetSession()
	owner := "ticketbench-" + base
	for j := range keys {
		key := fmt.Sprintf("%s/k%d", base, j)
		var acq *ticketv1.AcquireResponse
		err := retrySetup(ctx, func() (err error) {
			acq, err = client.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, Session: *id, Owner: owner})
			return err
		})
		if err != nil {
			return fmt.Errorf("acquire %s under session %d: %w", key, *id, err)
		}
		if acq.GetToken() == 0 || acq.GetSession() != *id {
			return fmt.Errorf("%w: acquire %s under session %d: token %d, session %d", ErrUnexpected, key, *id, acq.GetToken(), acq.GetSession())
		}
	}
	return nil
}
