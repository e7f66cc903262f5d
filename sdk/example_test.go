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
