package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log"
	"time"

	"github.com/ticketd/ticketd/sdk"
)

// Like example_test.go's, these run against a fresh fake cluster each.

func ExampleClient_Watch() {
	c, err := sdk.New(exampleCluster(3))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	a, err := c.TryLock(ctx, "jobs/a", time.Minute) // held before the watch: WithExisting lists it
	if err != nil {
		log.Fatal(err)
	}

	held := map[string]uint64{} // key -> token: a local view of jobs/
	for ev, err := range c.Watch(ctx, "jobs/", sdk.WithExisting(), sdk.WithStartedEvents()) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case sdk.EventReset:
			clear(held) // the held locks follow
		case sdk.EventGranted:
			held[ev.Key] = ev.Token
		case sdk.EventReleased, sdk.EventExpired:
			if held[ev.Key] == ev.Token {
				delete(held, ev.Key)
			}
		case sdk.EventStarted:
			// In place: every change from here on follows. Make two.
			if _, err := c.TryLock(ctx, "jobs/b", time.Minute); err != nil {
				log.Fatal(err)
			}
			if err := a.Unlock(ctx); err != nil {
				log.Fatal(err)
			}
		}
		fmt.Printf("%-8s %-6s %d held\n", ev.Type, ev.Key, len(held)) // resume later with WithStartIndex(ev.Index+1)
		if ev.Type == sdk.EventReleased {
			break
		}
	}
	// Output:
	// GRANTED  jobs/a 1 held
	// STARTED         1 held
	// GRANTED  jobs/b 2 held
	// RELEASED jobs/a 1 held
}

// A watch that must see the changes its own code is about to make waits for
// the announced start first (etcd clients wait for the created response).
func ExampleWithStartedEvents() {
	c, err := sdk.New(exampleCluster(3))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	next, stop := iter.Pull2(c.Watch(ctx, "jobs/", sdk.WithStartedEvents()))
	defer stop()
	ev, err, _ := next()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Type) // every change after ev.Index follows
	lease, err := c.TryLock(ctx, "jobs/a", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	ev, err, _ = next()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Type, ev.Key, ev.Token == lease.Token())
	// Output:
	// STARTED
	// GRANTED jobs/a true
}

func ExampleElection() {
	c, err := sdk.New(exampleCluster(3))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	el := sdk.NewElection(c, 10*time.Second)
	ld, err := el.Campaign(ctx, "scheduler", "host-a:8080")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading with term", ld.Term()) // pass the term to what the leader writes to
	who, err := el.Leader(ctx, "scheduler")     // what every other candidate sees
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", who.Value, "term:", who.Term)

	// Lead until ld.Done() closes (the lease was lost: stop acting as
	// leader at once), or give the leadership up:
	if err := ld.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	<-ld.Done()
	fmt.Println("resigned:", errors.Is(ld.Err(), sdk.ErrReleased))
	// Output:
	// leading with term 1
	// leader: host-a:8080 term: 1
	// resigned: true
}
