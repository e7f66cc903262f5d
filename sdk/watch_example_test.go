package sdk_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"time"

	"github.com/ticketd/ticketd/sdk"
)

// Like example_test.go's, these need a running cluster: compiled, not run.

func ExampleClient_Watch() {
	c, err := sdk.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	held := map[string]uint64{} // key -> token: a local view of jobs/
	for ev, err := range c.Watch(context.Background(), "jobs/", sdk.WithExisting()) {
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
		}
		fmt.Println(ev.Index, ev.Type, ev.Key, len(held), "held") // resume later with WithStartIndex(ev.Index+1)
	}
}

// A watch that must see the changes its own code is about to make waits for
// the announced start first (etcd clients wait for the created response).
func ExampleWithStartedEvents() {
	c, err := sdk.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"})
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
	fmt.Println("watching changes after index", ev.Index) // ev.Type == sdk.EventStarted
	lease, err := c.TryLock(ctx, "jobs/a", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	ev, err, _ = next()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Type, ev.Key, ev.Token == lease.Token()) // GRANTED jobs/a true
}

func ExampleElection() {
	c, err := sdk.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	el := sdk.NewElection(c, 10*time.Second)
	ld, err := el.Campaign(context.Background(), "scheduler", "host-a:8080")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading with term", ld.Term()) // pass the term to what the leader writes to
	select {
	case <-ld.Done(): // lost: stop acting as leader at once
		log.Print(ld.Err())
	case <-time.After(time.Minute):
		_ = ld.Resign(context.Background())
	}
}
