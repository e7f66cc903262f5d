package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
)

// ExampleNew runs a one-node cluster in-process and takes a lock through the
// Connect API over h2c.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "ticketd-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	raftAddrs, err := ticketdtest.PickAddrs(1) // below the ephemeral range: see ticketdtest.FreeAddrs
	if err != nil {
		panic(err)
	}
	raftAddr := raftAddrs[0]

	cfg := config.DefaultConfig()
	cfg.APIAddr = ln.Addr().String()
	cfg.RaftAddr = raftAddr
	cfg.DataDir = filepath.Join(dir, "n1")
	node, err := server.New(cfg)
	if err != nil {
		panic(err)
	}
	go node.Serve(ln)
	defer node.Close(context.Background())

	var h2c http.Protocols // HTTP/2 without TLS, as gRPC clients speak it
	h2c.SetUnencryptedHTTP2(true)
	httpClient := &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	client := ticketv1connect.NewLockServiceClient(httpClient, "http://"+cfg.APIAddr)
	res, err := client.Acquire(context.Background(), &ticketv1.AcquireRequest{Key: "jobs/nightly", LeaseMs: 10_000})
	if err != nil {
		panic(err)
	}
	fmt.Println("token", res.GetToken())
	// Output: token 1
}
