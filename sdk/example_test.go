package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ticketd/ticketd/sdk"
)

// These examples run under go test, each against a fresh fake cluster
// (exampleCluster, example_cluster_test.go); with a real one, pass its API
// addresses to sdk.New instead.

func ExampleNew() {
	endpoints := exampleCluster(3) // e.g. []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}
	c, err := sdk.New(endpoints,
		sdk.WithRequestTimeout(2*time.Second), // rare knobs are options
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	st, err := c.Status(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", st.GetLeaderId(), "members:", len(st.GetMembers()))
	fmt.Println("the client talks to the leader:", c.Leader() == endpoints[0])
	// Output:
	// leader: a members: 3
	// the client talks to the leader: true
}

func ExampleClient_Lock() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Wait at most a minute in the key's queue.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := c.Lock(ctx, "reports/daily", 10*time.Second)
	if errors.Is(err, sdk.ErrAmbiguous) {
		// The request may have been granted as ctx ended; nothing to undo:
		// the client releases such a grant in the background.
		log.Fatal(err)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())

	for step := 0; step < 3; step++ {
		select {
		case <-lease.Done():
			log.Fatalf("lock lost, stopping: %v", lease.Err())
		default:
		}
		// Do one step of the work, passing lease.Token() to every write.
		fmt.Println("step", step, "token", lease.Token())
	}
	// Output:
	// step 0 token 1
	// step 1 token 1
	// step 2 token 1
}

func ExampleClient_TryLock() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	for instance := 1; instance <= 2; instance++ {
		lease, err := c.TryLock(ctx, "singleton/cron", 5*time.Second)
		switch {
		case errors.Is(err, sdk.ErrLocked):
			fmt.Println("instance", instance, "stands by: another instance is running")
			continue
		case err != nil:
			log.Fatal(err)
		}
		defer lease.Unlock(ctx)
		fmt.Println("instance", instance, "running with token", lease.Token())
	}
	// Output:
	// instance 1 running with token 1
	// instance 2 stands by: another instance is running
}

func ExampleLease_Done() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	lease, err := c.Lock(context.Background(), "leader-election/app", 6*time.Second)
	if err != nil {
		log.Fatal(err)
	}

	// Tie the work's context to the lease: it is cancelled no later than
	// the lease's local deadline, before anyone else can be granted the key.
	work, cancel := context.WithCancel(context.Background())
	go func() {
		<-lease.Done()
		cancel()
	}()
	// Here the work ends the lease itself; a lost lease ends it the same way.
	if err := lease.Unlock(context.Background()); err != nil {
		log.Fatal(err)
	}
	<-work.Done()
	fmt.Println("lease ended:", lease.Err(), "released:", errors.Is(lease.Err(), sdk.ErrReleased))
	// Output: lease ended: ticketd: lease released released: true
}

func ExampleClient_Check() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	old, err := c.TryLock(ctx, "orders/42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_ = old.Unlock(ctx) // or its lease ran out: the key went to someone else
	cur, err := c.TryLock(ctx, "orders/42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer cur.Unlock(ctx)

	// A resource guarded by the lock checks the token a writer presents.
	valid, current, err := c.Check(ctx, "orders/42", old.Token())
	if err != nil {
		log.Fatal(err)
	}
	if !valid {
		fmt.Println("refusing write: token", old.Token(), "is stale, the current holder has", current)
	}
	// Output: refusing write: token 1 is stale, the current holder has 2
}

func ExampleAmbiguousError() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// With a caller-chosen owner, a retry after an ambiguous failure gets
	// the grant that the first request may have produced.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	g, err := c.Acquire(ctx, "batch/nightly", 30*time.Second, sdk.WithOwner("nightly-2025-01-01"))
	var ae *sdk.AmbiguousError
	if errors.As(err, &ae) {
		g, err = c.Acquire(context.Background(), ae.Key, 30*time.Second, sdk.WithOwner(ae.Owner))
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token", g.Token)

	// Any request with that owner gets the same grant back, from any process.
	again, err := c.Acquire(context.Background(), "batch/nightly", 30*time.Second, sdk.WithOwner("nightly-2025-01-01"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the same grant:", again.Token == g.Token)
	// Output:
	// token 1
	// the same grant: true
}

func ExampleClient_RLock() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // also closes the client's session, releasing its locks

	ctx := context.Background()
	// Many readers at once; held under the client's default session, which
	// one KeepAlive per TTL/3 keeps alive for all of them.
	read, err := c.RLock(ctx, "datasets/daily")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reading with token", read.Token(), "shared:", read.Shared())
	_ = read.Unlock(ctx)

	// One writer, once every reader is gone; readers that arrive while it
	// waits queue behind it (writer preference).
	write, err := c.Lock(ctx, "datasets/daily", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer write.Unlock(ctx)
	fmt.Println("writing with token", write.Token())
	// Output:
	// reading with token 1 shared: true
	// writing with token 2
}

func ExampleClient_Semaphore() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// At most 3 workers on the GPU pool, cluster-wide.
	sem := c.Semaphore("pools/gpu", 3)
	slot, err := sem.Acquire(context.Background())
	var lm *sdk.LimitMismatchError
	if errors.As(err, &lm) {
		log.Fatalf("pools/gpu is used with %d slots, not 3", lm.Limit)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer slot.Unlock(context.Background())
	select {
	case <-slot.Done():
		log.Fatalf("slot lost: %v", slot.Err())
	default:
		fmt.Println("working in a slot with token", slot.Token())
	}
	// Output: working in a slot with token 1
}

func ExampleClient_CreateSession() {
	c, err := sdk.New(exampleCluster(1))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// One lease for many locks: one KeepAlive renews them all, and Close
	// (or the lease running out) releases them all in one entry.
	s, err := c.CreateSession(ctx, 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	var leases []*sdk.Lease
	for _, shard := range []string{"shards/1", "shards/2", "shards/3"} {
		l, err := c.Lock(ctx, shard, 0, sdk.WithSession(s))
		if err != nil {
			log.Fatal(err)
		}
		leases = append(leases, l)
	}
	if err := s.Close(ctx); err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		<-l.Done() // closed with the session (lost or closed): the lock is gone
		fmt.Println(l.Key(), "token", l.Token(), "released:", errors.Is(l.Err(), sdk.ErrReleased))
	}
	// Output:
	// shards/1 token 1 released: true
	// shards/2 token 2 released: true
	// shards/3 token 3 released: true
}
