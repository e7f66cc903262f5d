package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"
)

// Kind is the client call an Op records.
type Kind uint8

// The calls of ticket.v1.LockService the workload makes.
const (
	// Acquire: AcquireRequest{Key, LeaseMS, Wait, Owner}; on OK, Token and ResLeaseMS are the response.
	Acquire Kind = iota + 1
	// Release: ReleaseRequest{Key, Token}.
	Release
	// Renew: RenewRequest{Key, Token}; on OK, ResLeaseMS is the response.
	Renew
	// Get: GetLockRequest{Key} (linearizable); on OK, Held, HolderToken and HolderOwner are the response.
	Get
	// CheckToken: CheckTokenRequest{Key, Token}; on OK, Valid and HolderToken (current_token) are the response.
	CheckToken
	// CreateSession: CreateSessionRequest{ttl_ms: LeaseMS}; on OK, Session and
	// ResLeaseMS (ttl_ms) are the response. Key is empty.
	CreateSession
	// KeepAlive: KeepAliveRequest{Session}; on OK, ResLeaseMS (ttl_ms) is the response.
	KeepAlive
	// CloseSession: CloseSessionRequest{Session}.
	CloseSession
)

var kindNames = [...]string{Acquire: "acquire", Release: "release", Renew: "renew", Get: "get", CheckToken: "check-token",
	CreateSession: "create-session", KeepAlive: "keep-alive", CloseSession: "close-session"}

// String returns the lower-case name of k ("acquire", "check-token", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler (JSON histories carry names).
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Errors wrap ErrBadHistory.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n != "" && n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown kind %q", ErrBadHistory, b)
}

// Outcome says whether an Op took effect.
type Outcome uint8

// Outcomes, as in Jepsen: ok, fail (certainly had no effect), info (unknown).
const (
	// Pending: the call has not returned yet (only inside a Recorder).
	Pending Outcome = iota
	// OK: the call returned a response; its outputs are valid.
	OK
	// Fail: the call returned an error that proves it changed nothing
	// (for example AlreadyExists, NotFound, InvalidArgument).
	Fail
	// Unknown: the call timed out or failed in a way that leaves open whether
	// it took effect; it may take effect at any time after Call, even after Return.
	Unknown
)

var outcomeNames = [...]string{Pending: "pending", OK: "ok", Fail: "fail", Unknown: "unknown"}

// String returns "ok", "fail", "unknown" or "pending".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// MarshalText implements encoding.TextMarshaler.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Errors wrap ErrBadHistory.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if n == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("%w: unknown outcome %q", ErrBadHistory, b)
}

// Op is one client call: its inputs, its outputs and its interval. Times are
// nanoseconds on the Recorder's monotonic clock (time since NewRecorder).
type Op struct {
	// ID is the Op's index in invocation order, unique in a history.
	ID int `json:"id"`
	// Client is the id of the client goroutine that made the call; one client
	// makes one call at a time.
	Client int `json:"client"`
	// Node is the index of the cluster node the request was sent to (-1 if
	// none); NodeID is its id, when the recorder's user knows it.
	Node   int    `json:"node"`
	NodeID string `json:"node_id,omitempty"`
	Kind   Kind   `json:"kind"`
	Key    string `json:"key"`
	// Owner is the AcquireRequest owner (Acquire only).
	Owner string `json:"owner,omitempty"`
	// LeaseMS is the requested lease in milliseconds (Acquire only).
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// Wait is AcquireRequest.wait.
	Wait bool `json:"wait,omitempty"`
	// Token is the fencing token: an input for Release, Renew and CheckToken,
	// the granted token for an OK Acquire.
	Token uint64 `json:"token,omitempty"`
	// Shared is AcquireRequest.mode == MODE_SHARED.
	Shared bool `json:"shared,omitempty"`
	// Limit is AcquireRequest.limit: a semaphore of Limit slots; 0 for a lock.
	Limit uint32 `json:"limit,omitempty"`
	// Session is AcquireRequest.session (0: none), the session of a
	// KeepAlive or CloseSession, and the id an OK CreateSession returned.
	Session uint64 `json:"session,omitempty"`

	// Outcome says whether the call took effect (see Classify).
	Outcome Outcome `json:"outcome"`
	// Code is the connect code or transport error that decided a Fail or Unknown outcome.
	Code string `json:"code,omitempty"`
	// ResLeaseMS is the lease in milliseconds returned by an OK Acquire or Renew.
	ResLeaseMS int64 `json:"res_lease_ms,omitempty"`
	// Held, HolderToken and HolderOwner are an OK Get's response; HolderToken
	// is also an OK CheckToken's current_token.
	Held        bool   `json:"held,omitempty"`
	HolderToken uint64 `json:"holder_token,omitempty"`
	HolderOwner string `json:"holder_owner,omitempty"`
	// Valid is an OK CheckToken's response.
	Valid bool `json:"valid,omitempty"`
	// Holders is an OK Get's holders: every holder of the key in token order
	// (one for an exclusive lock), as GetLockResponse.holders lists them.
	Holders []Holder `json:"holders,omitempty"`
	// KeyShared and KeyLimit are the key's mode and limit as an OK Get or
	// CheckToken reported them; KeyLimit is also the limit of the
	// LimitMismatch detail of a FailedPrecondition Acquire.
	KeyShared bool   `json:"key_shared,omitempty"`
	KeyLimit  uint32 `json:"key_limit,omitempty"`

	// Call is when the request was sent and Return when its outcome was known,
	// in nanoseconds since the Recorder started.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// Tag marks ops of a phase of the run ("final" reads after the last
	// restart, "probe" durability locks); empty for the ordinary workload.
	Tag string `json:"tag,omitempty"`
}

// Holder is one holder of a key as GetLock reported it (ticket.v1.Holder).
type Holder struct {
	Token   uint64 `json:"token"`
	Owner   string `json:"owner,omitempty"`
	Session uint64 `json:"session,omitempty"`
}

// Plain reports whether o is a request of the original exclusive API: an
// Acquire with neither mode shared, nor a limit, nor a session; every other
// Kind is plain too except the session calls.
func (o Op) Plain() bool {
	switch o.Kind {
	case CreateSession, KeepAlive, CloseSession:
		return false
	}
	return !o.Shared && o.Limit == 0 && o.Session == 0
}

// Mutates reports whether o can change the lock table (Acquire, Release).
// Renew changes only a leader-local deadline.
func (o Op) Mutates() bool { return o.Kind == Acquire || o.Kind == Release }

// Lease returns the lease in milliseconds the Op asked for or was given: the
// response's when the call returned one, else the request's.
func (o Op) Lease() int64 {
	if o.ResLeaseMS > 0 {
		return o.ResLeaseMS
	}
	return o.LeaseMS
}

// Infinity is the Return time check uses for an Unknown Op: it may take
// effect at any time after its Call.
const Infinity = int64(math.MaxInt64)

// EffectiveReturn is o.Return for OK and Fail ops and Infinity for Unknown
// ones (porcupine's treatment of a call with no response).
func (o Op) EffectiveReturn() int64 {
	if o.Outcome == Unknown || o.Outcome == Pending {
		return Infinity
	}
	return o.Return
}

// String formats o for humans: "#12 c3 n2 acquire k1 owner=c3-1 lease=2000 wait=false -> ok token=7 [1.2s, 1.3s]".
func (o Op) String() string {
	in := ""
	switch o.Kind {
	case Acquire:
		in = fmt.Sprintf(" owner=%s lease=%d wait=%v", o.Owner, o.LeaseMS, o.Wait)
		if o.Shared {
			in += " shared"
		}
		if o.Limit > 0 {
			in += fmt.Sprintf(" limit=%d", o.Limit)
		}
		if o.Session > 0 {
			in += fmt.Sprintf(" session=%d", o.Session)
		}
	case Release, Renew, CheckToken:
		in = fmt.Sprintf(" token=%d", o.Token)
	case CreateSession:
		in = fmt.Sprintf(" ttl=%d", o.LeaseMS)
	case KeepAlive, CloseSession:
		in = fmt.Sprintf(" session=%d", o.Session)
	}
	out := o.Outcome.String()
	if o.Outcome == OK {
		switch o.Kind {
		case Acquire:
			out += fmt.Sprintf(" token=%d", o.Token)
		case Get:
			switch {
			case !o.Held:
				out += " free"
			case len(o.Holders) > 1 || o.KeyShared || o.KeyLimit > 0:
				out += " held"
				if o.KeyShared {
					out += " shared"
				}
				if o.KeyLimit > 0 {
					out += fmt.Sprintf(" limit=%d", o.KeyLimit)
				}
				for _, h := range o.Holders {
					out += fmt.Sprintf(" [%d %s", h.Token, h.Owner)
					if h.Session > 0 {
						out += fmt.Sprintf(" s%d", h.Session)
					}
					out += "]"
				}
			default:
				out += fmt.Sprintf(" held token=%d owner=%s", o.HolderToken, o.HolderOwner)
			}
		case CreateSession:
			out += fmt.Sprintf(" session=%d ttl=%d", o.Session, o.ResLeaseMS)
		case CheckToken:
			out += fmt.Sprintf(" valid=%v current=%d", o.Valid, o.HolderToken)
		}
	} else if o.Code != "" {
		out += " (" + o.Code + ")"
	}
	tag := ""
	if o.Tag != "" {
		tag = " [" + o.Tag + "]"
	}
	node := o.NodeID
	if node == "" {
		node = fmt.Sprintf("node%d", o.Node)
	}
	return fmt.Sprintf("#%d c%d %s %s %s%s -> %s [%v, %v]%s", o.ID, o.Client, node, o.Kind, o.Key, in, out,
		time.Duration(o.Call), time.Duration(o.Return), tag)
}

// Sentinel errors of package history.
var (
	// ErrBadHistory: a stored history cannot be decoded.
	ErrBadHistory = errors.New("history: malformed history")
)

// Recorder stamps and collects Ops. It is safe for concurrent use.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder returns a Recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now returns the Recorder's clock: nanoseconds since NewRecorder, monotonic.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// At converts a Recorder timestamp back to a time.Time (for deadlines).
func (r *Recorder) At(ns int64) time.Time { return r.start.Add(time.Duration(ns)) }

// Invoke records the start of op: it assigns ID, stamps Call and sets Outcome
// to Pending. Fill the outputs of the returned copy and pass it to Complete.
func (r *Recorder) Invoke(op Op) Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	op.Outcome = Pending
	op.Call = r.Now()
	op.Return = 0
	r.ops = append(r.ops, op)
	return op
}

// Complete stamps Return and stores op's outputs and outcome. A Pending
// outcome is stored as Unknown. Completing an Op twice keeps the second.
func (r *Recorder) Complete(op Op) {
	now := r.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if op.Outcome == Pending {
		op.Outcome = Unknown
	}
	op.Return = now
	r.ops[op.ID] = op
}

// History returns a copy of every Op recorded so far, sorted by Call (which is
// ID order). Ops still Pending are returned as Unknown with Return set to now.
func (r *Recorder) History() []Op {
	now := r.Now()
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	for i := range out {
		if out[i].Outcome == Pending {
			out[i].Outcome, out[i].Return = Unknown, now
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// Write stores ops as JSON lines, one Op per line.
func Write(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("history: write op %d: %w", op.ID, err)
		}
	}
	return bw.Flush()
}

// Read loads a history stored by Write. Errors wrap ErrBadHistory or the reader's error.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for {
		var op Op
		err := dec.Decode(&op)
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: op %d: %w", ErrBadHistory, len(ops), err)
		}
		ops = append(ops, op)
	}
}
