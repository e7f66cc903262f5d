package etcd_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/core"
)

// ExampleNew starts a single-node cluster and grants a lock once the node
// reports itself the ready leader.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "ticketd-etcd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ready := make(chan struct{}, 1)
	cfg := backends.DefaultConfig()
	cfg.ID = "n1"
	cfg.RaftAddr = "127.0.0.1:7101"
	cfg.DataDir = filepath.Join(dir, "n1")
	cfg.Bootstrap = []core.Member{{ID: "n1", RaftAddr: cfg.RaftAddr}}
	cfg.StateMachine = core.NewStateMachine()
	cfg.OnLeaderChange = func(ev core.LeaderEvent) {
		if ev.IsLeader {
			ready <- struct{}{}
		}
	}
	n, err := etcd.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close()
	<-ready
	res, err := n.Propose(context.Background(), core.Grant("printer", 10_000, "alice"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome, res.Token)
}
