package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/bench/loopback"
)

// members is the cluster size: three, as ticketd's benchmark clusters.
const members = 3

// startTimeout bounds the members' start and the first leader election.
const startTimeout = 30 * time.Second

// cluster is three embedded etcd members and the client URL of the leader
// (endpoint).
type cluster struct {
	dir      string
	etcds    []*embed.Etcd
	endpoint string
}

// startCluster starts three members on free loopback ports with data under a
// new temporary directory in dir and waits for a leader.
func startCluster(ctx context.Context, dir string) (*cluster, error) {
	tmp, err := os.MkdirTemp(dir, "etcdpeer-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: tmp}
	addrs, err := loopback.FreeAddrs(2 * members)
	if err != nil {
		c.close()
		return nil, err
	}
	peerURL := func(i int) string { return "http://" + addrs[2*i] }
	clientURL := func(i int) string { return "http://" + addrs[2*i+1] }
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peerURL(i)))
	}
	for i := range members {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = filepath.Join(tmp, cfg.Name)
		pu, cu := mustURL(peerURL(i)), mustURL(clientURL(i))
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "ticketbench"
		cfg.ClusterState = embed.ClusterStateFlagNew
		cfg.LogLevel = "error"
		cfg.EnableGRPCGateway = false
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("start member %d: %w", i, err)
		}
		c.etcds = append(c.etcds, e)
	}
	wait, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for i, e := range c.etcds {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			c.close()
			return nil, fmt.Errorf("member %d: %w", i, err)
		case <-wait.Done():
			c.close()
			return nil, fmt.Errorf("member %d not ready: %w", i, wait.Err())
		}
	}
	leader, err := c.leader(wait)
	if err != nil {
		c.close()
		return nil, err
	}
	c.endpoint = clientURL(leader)
	return c, nil
}

// dial connects a client to endpoint (the leader's client URL).
func dial(endpoint string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return cli, nil
}

// leader returns the index of the member that leads, once one does.
func (c *cluster) leader(ctx context.Context) (int, error) {
	for {
		for i, e := range c.etcds {
			if e.Server.Leader() == e.Server.MemberID() {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, errors.New("no leader elected: " + ctx.Err().Error())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *cluster) close() {
	for _, e := range c.etcds {
		e.Close()
	}
	os.RemoveAll(c.dir)
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return *u
}
