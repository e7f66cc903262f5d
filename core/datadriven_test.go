package core_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/ticketd/ticketd/core"
)

// TestApplyScripts runs the datadriven scripts in testdata/apply against one
// StateMachine per file. Update the expected output with
//
//	go test -run TestApplyScripts ./core/ -rewrite
//
// and review the diff (as etcd raft does with its interaction tests).
//
// Directives (index defaults to AppliedIndex()+1):
//
//	grant [index=N] key=K lease_ms=L owner=O [lock_delay_ms=D] [principal=P]
//	                                           → the Result
//	release [index=N] key=K token=T            → the Result
//	renew [index=N] key=K token=T              → the Result
//	expire [index=N] key=K token=T [seen=S]    → the Result (seen: ExpireSeen)
//	noop [index=N]                             → the Result
//	set-member [index=N] id=I api_addr=A       → the Result
//	skip index=N                               → applied=N'
//	entry [index=N] hex=BYTES                  → ApplyEntry of raw bytes: command and Result, or the error
//	locks                                      → the lock table, last_token, applied index
//	delays                                     → the lock-delay records
//	members                                    → the member directory
//	snapshot                                   → size and CRC-32C of the snapshot (kept for restore)
//	restore                                    → restores the last snapshot, then prints locks
func TestApplyScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/apply", func(t *testing.T, path string) {
		sm := core.NewStateMachine()
		var saved []byte
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			index := sm.AppliedIndex() + 1
			d.MaybeScanArgs(t, "index", &index)
			var (
				key, owner, id, addr, principal string
				leaseMS, lockDelayMS            int64
				token, seen                     uint64
			)
			apply := func(c core.Command) string {
				res, err := sm.Apply(index, c)
				if err != nil {
					return fmt.Sprintf("error: %v", err)
				}
				return formatResult(res)
			}
			switch d.Cmd {
			case "grant":
				d.ScanArgs(t, "key", &key)
				d.ScanArgs(t, "lease_ms", &leaseMS)
				d.ScanArgs(t, "owner", &owner)
				d.MaybeScanArgs(t, "lock_delay_ms", &lockDelayMS)
				d.MaybeScanArgs(t, "principal", &principal)
				return apply(core.Grant(key, leaseMS, owner).WithLockDelay(lockDelayMS).WithPrincipal(principal))
			case "release":
				d.ScanArgs(t, "key", &key)
				d.ScanArgs(t, "token", &token)
				return apply(core.Release(key, token))
			case "renew":
				d.ScanArgs(t, "key", &key)
				d.ScanArgs(t, "token", &token)
				return apply(core.Renew(key, token))
			case "expire":
				d.ScanArgs(t, "key", &key)
				d.ScanArgs(t, "token", &token)
				if d.HasArg("seen") {
					d.ScanArgs(t, "seen", &seen)
					return apply(core.ExpireSeen(key, token, seen))
				}
				return apply(core.Expire(key, token))
			case "noop":
				return apply(core.Noop())
			case "set-member":
				d.ScanArgs(t, "id", &id)
				d.MaybeScanArgs(t, "api_addr", &addr)
				return apply(core.SetMember(id, addr))
			case "skip":
				sm.Skip(index)
				return fmt.Sprintf("applied=%d", sm.AppliedIndex())
			case "entry":
				var h string
				d.ScanArgs(t, "hex", &h)
				data, err := hex.DecodeString(h)
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				cmd, res, err := sm.ApplyEntry(index, data)
				if err != nil {
					return fmt.Sprintf("error: %v", err)
				}
				return fmt.Sprintf("%s\n%s", formatCommand(cmd), formatResult(res))
			case "locks":
				return formatLocks(sm)
			case "delays":
				return formatDelays(sm)
			case "members":
				return formatMembers(sm)
			case "snapshot":
				saved = snapshotBytes(t, sm)
				return fmt.Sprintf("snapshot applied=%d bytes=%d crc32c=%08x",
					sm.AppliedIndex(), len(saved), crc32.Checksum(saved, crc32.MakeTable(crc32.Castagnoli)))
			case "restore":
				if err := sm.Restore(bytes.NewReader(saved)); err != nil {
					return fmt.Sprintf("error: %v", err)
				}
				if got := snapshotBytes(t, sm); !bytes.Equal(got, saved) {
					t.Errorf("%s: snapshot after restore differs from the restored one", d.Pos)
				}
				return formatLocks(sm)
			}
			t.Fatalf("%s: unknown directive %q", d.Pos, d.Cmd)
			return ""
		})
	})
}

// formatResult renders r the way the scripts spell results.
func formatResult(r core.Result) string {
	switch r.Outcome {
	case core.OutcomeGranted:
		if !r.Created {
			return fmt.Sprintf("granted token=%d lease_ms=%d existing", r.Token, r.LeaseMS)
		}
		return fmt.Sprintf("granted token=%d lease_ms=%d", r.Token, r.LeaseMS)
	case core.OutcomeGrantRejected:
		return fmt.Sprintf("grant-rejected holder_token=%d", r.Token)
	case core.OutcomeExpired:
		if r.LockDelayMS != 0 {
			return fmt.Sprintf("expired existed=%t lock_delay_ms=%d", r.Existed, r.LockDelayMS)
		}
		return fmt.Sprintf("expired existed=%t", r.Existed)
	case core.OutcomeRenewed:
		return fmt.Sprintf("renewed lease_ms=%d", r.LeaseMS)
	}
	return r.Outcome.String()
}

// formatCommand renders c with the fields of its op.
func formatCommand(c core.Command) string {
	switch c.Op {
	case core.OpGrant:
		return fmt.Sprintf("grant key=%s lease_ms=%d owner=%s", c.Key, c.LeaseMS, c.Owner) +
			optional("lock_delay_ms", c.LockDelayMS, 0) + optional("principal", c.Principal, "")
	case core.OpRelease, core.OpRenew:
		return fmt.Sprintf("%s key=%s token=%d", c.Op, c.Key, c.Token)
	case core.OpExpire:
		return fmt.Sprintf("expire key=%s token=%d", c.Key, c.Token) + optional("seen", c.SeenIndex, 0)
	case core.OpSetMember:
		return fmt.Sprintf("set-member id=%s api_addr=%s", c.MemberID, c.APIAddr)
	}
	return c.Op.String()
}

// optional renders " name=v", or nothing when v is zero: new fields stay out
// of the output of scripts that do not use them.
func optional[T comparable](name string, v, zero T) string {
	if v == zero {
		return ""
	}
	return fmt.Sprintf(" %s=%v", name, v)
}

func formatLocks(sm *core.StateMachine) string {
	var b strings.Builder
	sm.Ascend(func(l core.Lock) bool {
		fmt.Fprintf(&b, "%s token=%d lease_ms=%d owner=%s mod_index=%d%s%s\n", l.Key, l.Token, l.LeaseMS, l.Owner,
			l.ModIndex, optional("lock_delay_ms", l.LockDelayMS, 0), optional("principal", l.Principal, ""))
		return true
	})
	fmt.Fprintf(&b, "locks=%d last_token=%d applied=%d", sm.Len(), sm.LastToken(), sm.AppliedIndex())
	return b.String()
}

func formatDelays(sm *core.StateMachine) string {
	var b strings.Builder
	n := 0
	sm.AscendLockDelays(func(d core.LockDelay) bool {
		fmt.Fprintf(&b, "%s lock_delay_ms=%d index=%d\n", d.Key, d.LockDelayMS, d.Index)
		n++
		return true
	})
	fmt.Fprintf(&b, "delays=%d", n)
	return b.String()
}

func formatMembers(sm *core.StateMachine) string {
	m := sm.Members()
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%s api_addr=%s\n", id, m[id])
	}
	fmt.Fprintf(&b, "members=%d", len(ids))
	return b.String()
}
