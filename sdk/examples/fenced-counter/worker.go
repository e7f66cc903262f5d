package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ticketd/ticketd/sdk"
)

// errStale: the store refused a request because its token is stale.
var errStale = errors.New("stale fencing token")

// workerConfig is one worker process's job.
type workerConfig struct {
	endpoints  []string
	store      string // base URL of the store
	key        string // lock key
	id         int
	rounds     int
	ttl        time.Duration
	stallRound int // round in which to stall between reading and writing; -1: never
}

// workerMain parses the worker's flags and runs it; it returns the exit code.
func workerMain(ctx context.Context, args []string, logw io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var (
		cfg workerConfig
		eps string
	)
	fs.StringVar(&eps, "endpoints", "", "ticketd API endpoints, comma-separated")
	fs.StringVar(&cfg.store, "store", "", "store base URL")
	fs.StringVar(&cfg.key, "key", "", "lock key")
	fs.IntVar(&cfg.id, "id", 0, "worker id")
	fs.IntVar(&cfg.rounds, "rounds", 1, "increments to make")
	fs.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "lease TTL")
	fs.IntVar(&cfg.stallRound, "stall-round", -1, "round in which to stall before writing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.endpoints = strings.Split(eps, ",")
	if err := runWorker(ctx, cfg, logw); err != nil {
		fmt.Fprintf(logw, "worker %d: %v\n", cfg.id, err)
		return 1
	}
	return 0
}

// runWorker loops lock → read → increment → write with token → unlock.
func runWorker(ctx context.Context, cfg workerConfig, logw io.Writer) error {
	c, err := sdk.New(cfg.endpoints)
	if err != nil {
		return err
	}
	defer c.Close()
	for round := range cfg.rounds {
		lease, err := c.Lock(ctx, cfg.key, cfg.ttl)
		if err != nil {
			return fmt.Errorf("round %d: lock: %w", round, err)
		}
		tok := lease.Token()
		v, err := call(ctx, cfg.store+"/read", storeRequest{Worker: cfg.id, Token: tok})
		if err != nil {
			_ = lease.Unlock(ctx)
			if errors.Is(err, errStale) {
				fmt.Fprintf(logw, "worker %d token %d: read refused: %v\n", cfg.id, tok, err)
				continue
			}
			return fmt.Errorf("round %d: read: %w", round, err)
		}
		if round == cfg.stallRound && lease.Err() == nil {
			// The lease looks fine... and then the process is stopped
			// (a GC pause, a VM migration, SIGSTOP) before it writes.
			fmt.Fprintf(logw, "worker %d token %d: read %d, lease valid, stalling\n", cfg.id, tok, v)
			if _, err := call(ctx, cfg.store+"/stall", storeRequest{Worker: cfg.id, Token: tok}); err != nil {
				return fmt.Errorf("round %d: stall: %w", round, err)
			}
			fmt.Fprintf(logw, "worker %d token %d: resumed, lease err: %v; writing %d anyway\n", cfg.id, tok, lease.Err(), v+1)
		}
		_, err = call(ctx, cfg.store+"/write", storeRequest{Worker: cfg.id, Token: tok, Value: v + 1})
		switch {
		case errors.Is(err, errStale):
			fmt.Fprintf(logw, "worker %d token %d: write of %d refused: %v\n", cfg.id, tok, v+1, err)
		case err != nil:
			_ = lease.Unlock(ctx)
			return fmt.Errorf("round %d: write: %w", round, err)
		default:
			fmt.Fprintf(logw, "worker %d token %d: wrote %d\n", cfg.id, tok, v+1)
		}
		if err := lease.Unlock(ctx); err != nil && !errors.Is(err, sdk.ErrNotHeld) {
			return fmt.Errorf("round %d: unlock: %w", round, err)
		}
	}
	return nil
}

// call posts req to the store and returns the counter value it replies.
func call(ctx context.Context, url string, req storeRequest) (int64, error) {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var rep storeReply
	if err := json.NewDecoder(res.Body).Decode(&rep); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", url, res.Status, err)
	}
	switch res.StatusCode {
	case http.StatusOK:
		return rep.Value, nil
	case http.StatusConflict:
		return 0, fmt.Errorf("%w: %s", errStale, rep.Error)
	}
	return 0, fmt.Errorf("%s: %s: %s", url, res.Status, rep.Error)
}
