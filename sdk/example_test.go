package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ticketd/ticketd/sdk"
)

// These examples need a running cluster (`make run`), so they are compiled
// but not run by go test.

func ExampleNew() {
	c, err := sdk.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"},
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
	fmt.Println("leader:", st.GetLeaderId(), "term:", st.GetTerm())
}

func ExampleClient_Lock() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
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

	for step := 0; step < 10; step++ {
		select {
		case <-lease.Done():
			log.Fatalf("lock lost, stopping: %v", lease.Err())
		default:
		}
		// Do one step of the work, passing lease.Token() to every write.
		fmt.Println("step", step, "token", lease.Token())
	}
}

func ExampleClient_TryLock() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	lease, err := c.TryLock(context.Background(), "singleton/cron", 5*time.Second)
	switch {
	case errors.Is(err, sdk.ErrLocked):
		fmt.Println("another instance is running")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	fmt.Println("running with token", lease.Token())
}

func ExampleLease_Done() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
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
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-lease.Done()
		cancel()
	}()
	<-ctx.Done()
	fmt.Println("lease ended:", lease.Err(), "released:", errors.Is(lease.Err(), sdk.ErrReleased))
}

func ExampleClient_Check() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// A resource guarded by the lock checks the token a writer presents.
	valid, current, err := c.Check(context.Background(), "orders/42", 17)
	if err != nil {
		log.Fatal(err)
	}
	if !valid {
		fmt.Println("refusing write: token 17 is stale, current holder has", current)
	}
}

func ExampleAmbiguousError() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
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
}

func ExampleClient_RLock() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
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
}

func ExampleClient_Semaphore() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
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
}

func ExampleClient_CreateSession() {
	c, err := sdk.New([]string{"127.0.0.1:7001"})
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
	defer s.Close(ctx)
	for _, shard := range []string{"shards/1", "shards/2", "shards/3"} {
		if _, err := c.Lock(ctx, shard, 0, sdk.WithSession(s)); err != nil {
			log.Fatal(err)
		}
	}
	<-s.Done() // lost (or closed): every lock above is gone with it
	fmt.Println("session ended:", s.Err())
}
