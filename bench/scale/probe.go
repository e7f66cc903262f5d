package scale

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ticketd/ticketd/bench/report"
)

// snapshot times `ticketctl snapshot save` of the cluster into a file and
// `ticketd restore` of that file into an empty data dir (one member of a
// new cluster with the same members), records both and the file's size
// in st, and removes the file and the restored data dir.
func (s *scaler) snapshot(ctx context.Context, st *report.ScaleStep) error {
	file := filepath.Join(s.cfg.Dir, "scale.snap")
	restored := filepath.Join(s.cfg.Dir, "restored")
	defer os.Remove(file)
	defer os.RemoveAll(restored)
	var endpoints, members []string
	for _, n := range s.c.Nodes() {
		endpoints = append(endpoints, n.APIAddr)
		members = append(members, n.ID+"="+n.RaftAddr+"/"+n.APIAddr)
	}
	save, err := timed(ctx, s.cfg.Ctl, "--endpoints", strings.Join(endpoints, ","), "--timeout", s.cfg.SettleTimeout.String(),
		"snapshot", "save", file)
	if err != nil {
		return fmt.Errorf("ticketctl snapshot save: %w", err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	st.SnapshotSaveMS, st.SnapshotBytes = ms(save), fi.Size()
	n1 := s.c.Nodes()[0]
	restore, err := timed(ctx, s.cfg.Binary, "restore", "--snapshot", file, "--data-dir", restored,
		"--id", n1.ID, "--raft-addr", n1.RaftAddr, "--api-addr", n1.APIAddr,
		"--backend", s.cfg.Backend, "--bootstrap", strings.Join(members, ","))
	if err != nil {
		return fmt.Errorf("ticketd restore: %w", err)
	}
	st.RestoreMS = ms(restore)
	s.cfg.logf("%s: snapshot save %v (%d bytes), restore %v", s.cfg.Backend, save.Round(time.Millisecond), fi.Size(), restore.Round(time.Millisecond))
	return nil
}

// timed runs bin with args and returns its wall time. Errors: a failed
// run, with its output.
func timed(ctx context.Context, bin string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return took, nil
}

// usage returns each node's data dir size and RSS, in node order; a node
// whose figure cannot be read gets 0 and a call of failed.
func (s *scaler) usage(failed func(what string, err error)) (disk, rss []int64) {
	for _, n := range s.c.Nodes() {
		d, err := dirBytes(n.DataDir)
		if err != nil {
			failed("data dir size of "+n.ID, err)
		}
		r, err := rssBytes(n.PID())
		if err != nil {
			failed("RSS of "+n.ID, err)
		}
		disk, rss = append(disk, d), append(rss, r)
	}
	return disk, rss
}

// restartFollower kills a follower with SIGKILL, starts it again on its
// data dir at once, and returns the time from the kill until its /readyz
// answers 200 (replay done, applied within reach of the commit index;
// server/readiness.go).
func (s *scaler) restartFollower(ctx context.Context) (time.Duration, error) {
	leader, err := s.settle(ctx)
	if err != nil {
		return 0, err
	}
	f := (leader + 1) % len(s.c.Nodes())
	killed := time.Now()
	s.c.Kill(f)
	if err := s.c.Restart(f); err != nil {
		return 0, err
	}
	url := "http://" + s.c.Nodes()[f].APIAddr + "/readyz"
	deadline := killed.Add(s.cfg.SettleTimeout)
	for time.Now().Before(deadline) {
		if s.ready(ctx, url) {
			took := time.Since(killed)
			s.cfg.logf("%s: follower %s ready %v after kill -9", s.cfg.Backend, s.c.Nodes()[f].ID, took.Round(time.Millisecond))
			return took, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("%s not ready within %v of its restart", s.c.Nodes()[f].ID, s.cfg.SettleTimeout)
}

// ready reports whether GET url answers 200.
func (s *scaler) ready(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	res, err := s.c.HTTP().Do(req)
	if err != nil {
		return false
	}
	_ = res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// failover kills the leader with SIGKILL, times the first write
// acknowledged through a survivor (failover.Cluster.FirstWrite, with key),
// reads the new leader's Raft leadership → promotion from the survivors'
// logs (promoted false when neither has it), and restarts the killed node.
func (s *scaler) failover(ctx context.Context, key string) (took, promotion time.Duration, promoted bool, err error) {
	leader, err := s.settle(ctx)
	if err != nil {
		return 0, 0, false, err
	}
	killed := time.Now()
	s.c.Kill(leader)
	took, err = s.c.FirstWrite(ctx, key, killed, s.cfg.WriteTimeout)
	if err == nil {
		promotion, promoted = s.promotion(ctx, leader, killed)
		s.cfg.logf("%s: failover %v, promotion %v (found %v)", s.cfg.Backend, took.Round(time.Millisecond), promotion, promoted)
	}
	if rerr := s.c.Restart(leader); rerr != nil && err == nil {
		err = rerr
	}
	return took, promotion, promoted, err
}

// promotionWait bounds the wait for the promotion line: the first write
// can be acknowledged a moment before the new leader logs its promotion.
const promotionWait = 5 * time.Second

// promotion returns the Raft leadership → promotion of whichever node but
// killed became leader after since, from its log (promotionAfter); ok is
// false when none logged one within promotionWait.
func (s *scaler) promotion(ctx context.Context, killed int, since time.Time) (time.Duration, bool) {
	deadline := time.Now().Add(promotionWait)
	for {
		for i, n := range s.c.Nodes() {
			if i == killed {
				continue
			}
			if d, ok, err := promotionAfter(n.LogFile, since); err == nil && ok {
				return d, true
			}
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
