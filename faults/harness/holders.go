//go:build faults

package harness

import (
	"context"
	"sync"
)

// The workloads beside the hot keys: readers-writer keys,
// semaphores and sessions (package doc).

// rwKeys, semKeys (with their limits) and sessionKeys are the keys of the
// readers-writer, semaphore and session workloads.
var (
	rwKeys      = []string{"rw/0", "rw/1"}
	semKeys     = []lockSpec{{key: "sem/0", limit: 2}, {key: "sem/1", limit: 3}}
	sessionKeys = []string{"sess/0", "sess/1", "sess/2", "sess/3"}
)

// startHolderWorkloads starts cfg's readers-writer, semaphore and session
// clients on wg until ctx ends, and returns the keys they use
// (for the liveness polls and the final reads). newClient(i) makes their
// i-th client.
func startHolderWorkloads(ctx context.Context, wg *sync.WaitGroup, cfg Config, newClient func(id int) *client, lastToken func() uint64) []string {
	var keys []string
	id := 0
	next := func() *client { id++; return newClient(id - 1) }
	if cfg.RWWorkers > 0 {
		keys = append(keys, rwKeys...)
	}
	for range max(cfg.RWWorkers, 0) {
		cl := next()
		wg.Go(func() {
			cl.lockWorker(ctx, func() lockSpec {
				return lockSpec{key: rwKeys[cl.rng.Intn(len(rwKeys))], shared: cl.rng.Float64() < 0.7}
			}, cfg.LeaseMS, lastToken)
		})
	}
	if cfg.SemWorkers > 0 {
		for _, k := range semKeys {
			keys = append(keys, k.key)
		}
	}
	for range max(cfg.SemWorkers, 0) {
		cl := next()
		wg.Go(func() {
			cl.lockWorker(ctx, func() lockSpec {
				spec := semKeys[cl.rng.Intn(len(semKeys))]
				if cl.rng.Float64() < 0.05 {
					spec.limit++ // another limit: LimitMismatch while the key is held or waited for
				}
				return spec
			}, cfg.LeaseMS, lastToken)
		})
	}
	if cfg.SessionWorkers > 0 {
		keys = append(keys, sessionKeys...)
	}
	for range max(cfg.SessionWorkers, 0) {
		cl := next()
		wg.Go(func() { cl.sessionWorker(ctx, sessionKeys, cfg.LeaseMS) })
	}
	return keys
}
