package core_test

import (
	"bytes"
	"fmt"

	"github.com/ticketd/ticketd/core"
)

// The command table in action: a grant, a rejected grant, a retried grant, a
// stale release and a real one.
func ExampleStateMachine_Apply() {
	sm := core.NewStateMachine()
	show := func(index uint64, c core.Command) {
		res, err := sm.Apply(index, c)
		if err != nil {
			panic(err) // fatal for a node: never skip an entry
		}
		fmt.Printf("%d %-7s -> %s token=%d\n", index, c.Op, res.Outcome, res.Token)
	}
	show(1, core.Grant("orders/42", 10_000, "worker-a"))
	show(2, core.Grant("orders/42", 10_000, "worker-b"))
	show(3, core.Grant("orders/42", 10_000, "worker-a")) // a retry: idempotent
	show(4, core.Release("orders/42", 7))                // wrong token
	show(5, core.Release("orders/42", 1))
	show(6, core.Grant("orders/42", 10_000, "worker-b"))
	fmt.Println("last token:", sm.LastToken())
	// Output:
	// 1 grant   -> granted token=1
	// 2 grant   -> grant-rejected token=1
	// 3 grant   -> granted token=1
	// 4 release -> not-found token=0
	// 5 release -> released token=0
	// 6 grant   -> granted token=2
	// last token: 2
}

// A backend's apply loop: every committed entry is decoded and applied in log
// order; an error stops the node.
func ExampleStateMachine_ApplyEntry() {
	var log [][]byte // what a leader proposes: each command encoded once
	for _, c := range []core.Command{core.Noop(), core.Grant("a", 5000, "o1"), core.Expire("a", 1)} {
		data, err := core.Encode(c)
		if err != nil {
			panic(err)
		}
		log = append(log, data)
	}
	sm := core.NewStateMachine()
	for i, data := range log {
		cmd, res, err := sm.ApplyEntry(uint64(i+1), data)
		if err != nil {
			panic(err) // fatal: never skip
		}
		fmt.Println(cmd.Op, res.Outcome, res.Existed)
	}
	// Output:
	// noop noop false
	// grant granted false
	// expire expired true
}

// A snapshot restores into byte-identical state, and Restore rejects anything
// corrupt without changing the state machine.
func ExampleStateMachine_Restore() {
	sm := core.NewStateMachine()
	if _, err := sm.Apply(1, core.Grant("a", 5000, "o1")); err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if _, err := sm.Snapshot().WriteTo(&buf); err != nil {
		panic(err)
	}
	restored := core.NewStateMachine()
	if err := restored.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		panic(err)
	}
	l, _ := restored.Get("a")
	fmt.Println(l.Key, l.Token, l.Owner, restored.AppliedIndex())

	corrupt := bytes.Clone(buf.Bytes())
	corrupt[len(corrupt)/2] ^= 1
	fmt.Println(restored.Restore(bytes.NewReader(corrupt)) != nil, restored.Len())
	// Output:
	// a 1 o1 1
	// true 1
}

// A renewal that commits between the leader's expiry decision and its Expire
// wins: the Expire carries the ModIndex the leader saw. When a lock with a
// lock-delay expires, the key is recorded as delayed until it is granted again.
func ExampleExpireSeen() {
	sm := core.NewStateMachine()
	apply := func(index uint64, c core.Command) core.Result {
		res, err := sm.Apply(index, c)
		if err != nil {
			panic(err)
		}
		return res
	}
	apply(1, core.Grant("orders/42", 10_000, "worker-a").WithLockDelay(5_000))
	l, _ := sm.Get("orders/42")
	seen := l.ModIndex                                        // the leader decides the lease ran out
	fmt.Println(apply(2, core.Renew("orders/42", 1)).Outcome) // a renewal commits first
	res := apply(3, core.ExpireSeen("orders/42", 1, seen))
	fmt.Println("removed:", res.Existed)
	l, _ = sm.Get("orders/42")
	res = apply(4, core.ExpireSeen("orders/42", 1, l.ModIndex))
	fmt.Println("removed:", res.Existed, "lock_delay_ms:", res.LockDelayMS)
	d, _ := sm.LockDelay("orders/42")
	fmt.Printf("delayed %d ms from index %d\n", d.LockDelayMS, d.Index)
	// Output:
	// renewed
	// removed: false
	// removed: true lock_delay_ms: 5000
	// delayed 5000 ms from index 4
}

// Shared holders, a semaphore and a session: every holder has its own
// fencing token from the one counter, and a session's end removes all of its
// locks in one entry.
func ExampleStateMachine_Apply_holders() {
	sm := core.NewStateMachine()
	show := func(index uint64, c core.Command) core.Result {
		res, err := sm.Apply(index, c)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d %-13s -> %s token=%d holders=%d\n", index, c.Op, res.Outcome, res.Token, res.Holders)
		return res
	}
	show(1, core.Grant("dataset", 10_000, "reader-1").WithMode(core.ModeShared))
	show(2, core.Grant("dataset", 10_000, "reader-2").WithMode(core.ModeShared))
	show(3, core.Grant("dataset", 10_000, "writer"))         // waits in the server's queue
	show(4, core.Grant("gpu", 10_000, "job-1").WithLimit(2)) // semaphore, limit 2
	show(5, core.Grant("gpu", 10_000, "job-2").WithLimit(4)) // another limit
	s := show(6, core.CreateSession(30_000)).Session
	show(7, core.Grant("gpu", 10_000, "job-2").WithLimit(2).WithSession(s))
	res := show(8, core.CloseSession(s))
	fmt.Println("released with the session:", len(res.Ended.Locks))
	// Output:
	// 1 grant         -> granted token=1 holders=1
	// 2 grant         -> granted token=2 holders=2
	// 3 grant         -> grant-rejected token=1 holders=2
	// 4 grant         -> granted token=3 holders=1
	// 5 grant         -> limit-mismatch token=3 holders=1
	// 6 create-session -> session-created token=0 holders=0
	// 7 grant         -> granted token=4 holders=2
	// 8 close-session -> released token=0 holders=0
	// released with the session: 1
}
