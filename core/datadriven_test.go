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
//	grant [index=N] key=K lease_ms=L owner=O   → the Result
//	release [index=N] key=K token=T            → the Result
//	expire [index=N] key=K token=T             → the Result
//	noop [index=N]                             → the Result
//	set-member [index=N] id=I api_addr=A       → the Result
//	skip index=N                               → applied=N'
//	entry [index=N] hex=BYTES                  → ApplyEntry of raw bytes: command and Result, or the error
//	locks                                      → the lock table, last_token, applied index
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
				key, owner, id, addr string
				leaseMS              int64
				token                uint64
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
				return apply(core.Grant(key, leaseMS, owner))
			case "release":
				d.ScanArgs(t, "key", &key)
				d.ScanArgs(t, "token", &token)
				return apply(core.Release(key, token))
			case "expire":
				d.ScanArgs(t, "key", &key)
				d.ScanArgs(t, "token", &token)
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
		return fmt.Sprintf("expired existed=%t", r.Existed)
	}
	return r.Outcome.String()
}

// formatCommand renders c with the fields of its op.
func formatCommand(c core.Command) string {
	switch c.Op {
	case core.OpGrant:
		return fmt.Sprintf("grant key=%s lease_ms=%d owner=%s", c.Key, c.LeaseMS, c.Owner)
	case core.OpRelease, core.OpExpire:
		return fmt.Sprintf("%s key=%s token=%d", c.Op, c.Key, c.Token)
	case core.OpSetMember:
		return fmt.Sprintf("set-member id=%s api_addr=%s", c.MemberID, c.APIAddr)
	}
	return c.Op.String()
}

func formatLocks(sm *core.StateMachine) string {
	var b strings.Builder
	sm.Ascend(func(l core.Lock) bool {
		fmt.Fprintf(&b, "%s token=%d lease_ms=%d owner=%s\n", l.Key, l.Token, l.LeaseMS, l.Owner)
		return true
	})
	fmt.Fprintf(&b, "locks=%d last_token=%d applied=%d", sm.Len(), sm.LastToken(), sm.AppliedIndex())
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
