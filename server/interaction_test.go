package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/ticketd/ticketd/core"
)

// TestInteraction runs the scripts in testdata/interaction: each drives one
// node's Acquire, Renew, Release, expiry, ghost and waiter paths step by step
// over memraft's step-by-step mode and a fake clock (etcd raft's
// interaction_test.go is the model), and prints after every step what
// happened (proposals, applies, client replies, watch events, invariant
// violations: I1–I9 of interleave_test.go, I10 of harness_session_test.go,
// W1 of harness_watch_test.go) and the state (log, lock table, sessions,
// waiting clients). Update with -rewrite.
//
// Verbs:
//
//	acquire name=c1 key=a owner=o1 [lease=1000] [wait] [lock_delay=0] [mode=shared] [limit=2] [session=4]
//	                                                     client c1 sends Acquire (under session 4)
//	renew name=r1 key=a token=1                          client r1 sends Renew
//	release name=x1 key=a token=1                        client x1 sends Release
//	create-session name=s1 [ttl=1000]                    client s1 sends CreateSession (its id is
//	                                                     the index of its entry)
//	keepalive name=k1 session=4                          client k1 sends KeepAlive
//	close-session name=x1 session=4                      client x1 sends CloseSession
//	get name=g1 key=a                                    client g1 sends a linearizable GetLock
//	watch name=w1 [prefix=a] [start=5] [existing]        client w1 opens a Watch (checked: W1,
//	                                                     harness_watch_test.go)
//	client-gone name=c1                                  c1 goes away (its ctx ends)
//	grant-first        the next Release's handed-off Grant enters the log before it
//	hold [reads]       proposals (and reads) wait for commit/apply (and confirm)
//	commit [n=1]       commit the next n proposed entries (all without n)
//	apply [n=1]        apply the next n committed entries (all without n)
//	confirm            answer held reads (leadership is confirmed now)
//	tick 250ms         move the fake clock; the lessor's timers fire
//	expiry-round       move the clock to the earliest lease deadline
//	demote | promote   leadership changes (promote applies the log, then a barrier)
//	restart            kill -9 and restart: a new node replays the log now and follows
//	replicate renew|release key=a token=1 | replicate grant key=a owner=o2 [lease=1000]
//	replicate keepalive session=4
//	                   while demoted: another leader's entry applies here
//	leader? | locks    print leadership or the lock table (and lock-delays, sessions)
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata/interaction", func(t *testing.T, path string) {
		h := newHarness(t, t.TempDir())
		h.gate.enable() // concurrent Grants in send order (harness_gate_test.go)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if err := step(h, d); err != nil {
				return "error: " + err.Error() + "\n"
			}
			var b strings.Builder
			for _, e := range h.flush() {
				b.WriteString("> " + e + "\n")
			}
			h.mu.Lock()
			for _, v := range h.check.violations {
				b.WriteString("!! VIOLATION " + v + "\n")
				t.Errorf("%s: %s: %s", d.Pos, d.Cmd, v) // even under -rewrite
			}
			h.check.violations = nil
			h.mu.Unlock()
			switch d.Cmd {
			case "leader?":
				b.WriteString(h.leaderString() + "\n")
			case "locks":
				b.WriteString(h.locksString())
			default:
				b.WriteString(h.stateString())
			}
			return b.String()
		})
	})
}

// step runs one script command.
func step(h *harness, d *datadriven.TestData) error {
	arg := func(name string) string {
		for _, a := range d.CmdArgs {
			if a.Key == name && len(a.Vals) > 0 {
				return a.Vals[0]
			}
		}
		return ""
	}
	num := func(name string, def int64) (int64, error) {
		v := arg(name)
		if v == "" {
			return def, nil
		}
		return strconv.ParseInt(v, 10, 64)
	}
	switch d.Cmd {
	case "acquire":
		lease, err := num("lease", 1000)
		if err != nil {
			return err
		}
		delay, err := num("lock_delay", 0)
		if err != nil {
			return err
		}
		limit, err := num("limit", 0)
		if err != nil {
			return err
		}
		session, err := num("session", 0)
		if err != nil {
			return err
		}
		r := acquireRequest{key: arg("key"), leaseMS: lease, owner: arg("owner"), wait: d.HasArg("wait"),
			lockDelayMS: delay, limit: uint32(limit), session: uint64(session)}
		switch arg("mode") {
		case "", "exclusive":
		case "shared":
			r.mode = core.ModeShared
		default:
			return fmt.Errorf("acquire: unknown mode %q", arg("mode"))
		}
		return h.acquireReq(arg("name"), r)
	case "replicate":
		if len(d.CmdArgs) == 0 {
			return fmt.Errorf("replicate takes a command")
		}
		lease, err := num("lease", 1000)
		if err != nil {
			return err
		}
		token, err := num("token", 0)
		if err != nil {
			return err
		}
		session, err := num("session", 0)
		if err != nil {
			return err
		}
		switch d.CmdArgs[0].Key {
		case "grant":
			return h.replicate(core.Grant(arg("key"), lease, arg("owner")))
		case "renew":
			return h.replicate(core.Renew(arg("key"), uint64(token)))
		case "release":
			return h.replicate(core.Release(arg("key"), uint64(token)))
		case "keepalive":
			return h.replicate(core.KeepAliveSession(uint64(session)))
		}
		return fmt.Errorf("replicate: unknown command %q", d.CmdArgs[0].Key)
	case "renew", "release":
		token, err := num("token", 0)
		if err != nil {
			return err
		}
		if d.Cmd == "renew" {
			return h.renew(arg("name"), arg("key"), uint64(token))
		}
		return h.release(arg("name"), arg("key"), uint64(token))
	case "create-session":
		ttl, err := num("ttl", 1000)
		if err != nil {
			return err
		}
		return h.createSession(arg("name"), ttl)
	case "keepalive", "close-session":
		session, err := num("session", 0)
		if err != nil {
			return err
		}
		if d.Cmd == "keepalive" {
			return h.keepAlive(arg("name"), uint64(session))
		}
		return h.closeSession(arg("name"), uint64(session))
	case "get":
		return h.get(arg("name"), arg("key"))
	case "watch":
		start, err := num("start", 0)
		if err != nil {
			return err
		}
		return h.watchOpen(arg("name"), arg("prefix"), uint64(start), d.HasArg("existing"))
	case "grant-first":
		h.grantFirstNext()
	case "client-gone":
		return h.clientGone(arg("name"))
	case "hold":
		h.hold(true, d.HasArg("reads"))
		h.settle()
	case "commit", "apply":
		count, err := num("n", -1)
		if err != nil {
			return err
		}
		if d.Cmd == "commit" {
			h.commit(int(count))
		} else {
			h.apply(int(count))
		}
	case "confirm":
		h.confirm()
	case "tick":
		if len(d.CmdArgs) != 1 {
			return fmt.Errorf("tick takes one duration")
		}
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			return err
		}
		h.tick(dur)
	case "expiry-round":
		h.expiryRound()
	case "demote":
		h.demote()
	case "restart":
		return h.restart()
	case "promote":
		h.promote()
	case "leader?", "locks":
		h.settle()
	default:
		return fmt.Errorf("unknown command %q", d.Cmd)
	}
	return nil
}
