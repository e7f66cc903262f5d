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
//	      [mode=shared|exclusive] [limit=N] [session=S]
//	                                           → the Result
//	release [index=N] key=K token=T            → the Result
//	renew [index=N] key=K token=T              → the Result
//	expire [index=N] key=K token=T [seen=S]    → the Result (seen: ExpireSeen)
//	create-session [index=N] ttl_ms=T [principal=P] → the Result
//	keep-alive-session [index=N] id=I          → the Result
//	close-session [index=N] id=I               → the Result, then what it removed
//	expire-session [index=N] id=I [seen=S]     → the Result, then what it removed
//	noop [index=N]                             → the Result
//	set-member [index=N] id=I api_addr=A       → the Result
//	skip index=N                               → applied=N'
//	entry [index=N] hex=BYTES                  → ApplyEntry of raw bytes: command and Result, or the error
//	locks                                      → the lock table (every holder), last_token, applied index
//	holders key=K                              → the holders of K
//	sessions                                   → the open sessions and the holders under each
//	delays                                     → the lock-delay records
//	members                                    → the member directory
//	snapshot                                   → size and CRC-32C of the snapshot (kept for restore), its version if not 2
//	restore                                    → restores the last snapshot, then prints locks
func TestApplyScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/apply", func(t *testing.T, path string) {
		sm := core.NewStateMachine()
		var saved []byte
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			index := sm.AppliedIndex() + 1
			d.MaybeScanArgs(t, "index", &index)
			var (
				key, owner, id, addr, principal, mode string
				leaseMS, lockDelayMS                  int64
				token, seen, session                  uint64
				limit                                 int
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
				d.MaybeScanArgs(t, "mode", &mode)
				d.MaybeScanArgs(t, "limit", &limit)
				d.MaybeScanArgs(t, "session", &session)
				return apply(core.Grant(key, leaseMS, owner).WithLockDelay(lockDelayMS).WithPrincipal(principal).
					WithMode(parseMode(t, d, mode)).WithLimit(uint32(limit)).WithSession(session))
			case "create-session":
				d.ScanArgs(t, "ttl_ms", &leaseMS)
				d.MaybeScanArgs(t, "principal", &principal)
				return apply(core.CreateSession(leaseMS).WithPrincipal(principal))
			case "keep-alive-session":
				d.ScanArgs(t, "id", &session)
				return apply(core.KeepAliveSession(session))
			case "close-session":
				d.ScanArgs(t, "id", &session)
				return apply(core.CloseSession(session))
			case "expire-session":
				d.ScanArgs(t, "id", &session)
				d.MaybeScanArgs(t, "seen", &seen)
				return apply(core.ExpireSession(session, seen))
			case "holders":
				d.ScanArgs(t, "key", &key)
				var b strings.Builder
				for _, l := range sm.Holders(key) {
					b.WriteString(formatLock(l) + "\n")
				}
				fmt.Fprintf(&b, "holders=%d", len(sm.Holders(key)))
				return b.String()
			case "sessions":
				return formatSessions(sm)
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
					sm.AppliedIndex(), len(saved), crc32.Checksum(saved, crc32.MakeTable(crc32.Castagnoli))) +
					optional("version", saved[0], core.SnapshotVersion2)
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
			return fmt.Sprintf("granted token=%d lease_ms=%d existing", r.Token, r.LeaseMS) + keyFields(r)
		}
		return fmt.Sprintf("granted token=%d lease_ms=%d", r.Token, r.LeaseMS) + keyFields(r)
	case core.OutcomeGrantRejected:
		return fmt.Sprintf("grant-rejected holder_token=%d", r.Token) + keyFields(r)
	case core.OutcomeLimitMismatch:
		return fmt.Sprintf("limit-mismatch holder_token=%d limit=%d", r.Token, r.Limit) + keyFields(r)
	case core.OutcomeExpired:
		if r.LockDelayMS != 0 {
			return fmt.Sprintf("expired existed=%t lock_delay_ms=%d", r.Existed, r.LockDelayMS) + keyFields(r) + ended(r)
		}
		return fmt.Sprintf("expired existed=%t", r.Existed) + keyFields(r) + ended(r)
	case core.OutcomeRenewed:
		return fmt.Sprintf("renewed lease_ms=%d", r.LeaseMS) + keyFields(r)
	case core.OutcomeSessionCreated:
		return fmt.Sprintf("session-created session=%d ttl_ms=%d", r.Session, r.LeaseMS)
	case core.OutcomeReleased:
		return "released" + keyFields(r) + ended(r)
	}
	return r.Outcome.String()
}

// keyFields renders the fields a Result has for shared and semaphore keys
// and sessions; nothing for a plain exclusive lock.
func keyFields(r core.Result) string {
	s := ""
	if r.Mode != core.ModeExclusive || r.Limit != 0 || r.Holders != 0 {
		s = fmt.Sprintf(" mode=%s limit=%d holders=%d", r.Mode, r.Limit, r.Holders)
	}
	if r.Outcome == core.OutcomeLimitMismatch {
		s = fmt.Sprintf(" mode=%s holders=%d", r.Mode, r.Holders)
	}
	return s + optional("session", r.Session, 0)
}

// ended renders what a session's end removed, one line per holder and delay.
func ended(r core.Result) string {
	if r.Ended == nil {
		return ""
	}
	var b strings.Builder
	for _, l := range r.Ended.Locks {
		b.WriteString("\nremoved " + formatLock(l))
	}
	for _, d := range r.Ended.Delays {
		fmt.Fprintf(&b, "\ndelayed %s lock_delay_ms=%d index=%d", d.Key, d.LockDelayMS, d.Index)
	}
	return b.String()
}

// parseMode reads the mode argument of a grant ("" is exclusive).
func parseMode(t *testing.T, d *datadriven.TestData, mode string) core.Mode {
	switch mode {
	case "", "exclusive":
		return core.ModeExclusive
	case "shared":
		return core.ModeShared
	}
	t.Fatalf("%s: unknown mode %q", d.Pos, mode)
	return 0
}

// formatCommand renders c with the fields of its op.
func formatCommand(c core.Command) string {
	switch c.Op {
	case core.OpGrant:
		return fmt.Sprintf("grant key=%s lease_ms=%d owner=%s", c.Key, c.LeaseMS, c.Owner) +
			optional("lock_delay_ms", c.LockDelayMS, 0) + optional("principal", c.Principal, "") +
			optional("mode", c.Mode, core.ModeExclusive) + optional("limit", c.Limit, 0) + optional("session", c.Session, 0)
	case core.OpCreateSession:
		return fmt.Sprintf("create-session ttl_ms=%d", c.LeaseMS) + optional("principal", c.Principal, "")
	case core.OpKeepAliveSession, core.OpCloseSession:
		return fmt.Sprintf("%s id=%d", c.Op, c.Session)
	case core.OpExpireSession:
		return fmt.Sprintf("expire-session id=%d", c.Session) + optional("seen", c.SeenIndex, 0)
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

// formatLock renders one holder; fields added since snapshot version 1
// (mod_index, lock-delay, principal, mode, limit, session) only when set, so
// scripts for plain locks read as they always did.
func formatLock(l core.Lock) string {
	return fmt.Sprintf("%s token=%d lease_ms=%d owner=%s mod_index=%d", l.Key, l.Token, l.LeaseMS, l.Owner, l.ModIndex) +
		optional("lock_delay_ms", l.LockDelayMS, 0) + optional("principal", l.Principal, "") +
		optional("mode", l.Mode, core.ModeExclusive) + optional("limit", l.Limit, 0) + optional("session", l.Session, 0)
}

func formatLocks(sm *core.StateMachine) string {
	var b strings.Builder
	sm.Ascend(func(l core.Lock) bool {
		b.WriteString(formatLock(l) + "\n")
		return true
	})
	fmt.Fprintf(&b, "locks=%d last_token=%d applied=%d", sm.Len(), sm.LastToken(), sm.AppliedIndex())
	if sm.HolderLen() != sm.Len() {
		fmt.Fprintf(&b, " holders=%d", sm.HolderLen())
	}
	return b.String()
}

func formatSessions(sm *core.StateMachine) string {
	var b strings.Builder
	var sessions []core.Session
	sm.AscendSessions(func(se core.Session) bool {
		sessions = append(sessions, se)
		return true
	})
	for _, se := range sessions {
		fmt.Fprintf(&b, "session %d ttl_ms=%d mod_index=%d%s\n", se.ID, se.TTLMS, se.ModIndex, optional("principal", se.Principal, ""))
		for _, l := range sm.SessionLocks(se.ID) {
			fmt.Fprintf(&b, "  %s token=%d\n", l.Key, l.Token)
		}
	}
	fmt.Fprintf(&b, "sessions=%d", len(sessions))
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
