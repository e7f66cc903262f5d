package watch

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ticketd/ticketd/core"
)

// Config bounds a Hub. Build it from DefaultConfig and check it with Validate.
type Config struct {
	// MaxHistoryEntries is the most events retained for resuming watchers;
	// the oldest entries are dropped first, each with all its events, and
	// the newest entry is kept whole even beyond the bound. At least 1.
	MaxHistoryEntries int
	// MaxHistoryBytes bounds the retained events' approximate memory, in
	// bytes (key, owner and a fixed overhead per event), as
	// MaxHistoryEntries does. At least 1.
	MaxHistoryBytes int64
	// MaxWatchers is the most watchers open at once on this node (0: no cap).
	MaxWatchers int
	// BufferEvents is each watcher's buffer of live events; a watcher whose
	// buffer has no room for all of an entry's events (those under its
	// prefix) when the entry applies is ended with ErrSlow before any of
	// them. At least 1; an entry larger than it reaches watchers only from
	// the history (a watch resumed at its index), so the server keeps it at
	// least limits.max_locks_per_session, the largest entry it makes.
	BufferEvents int
	// Applied returns the node's last applied log index (the state machine's
	// AppliedIndex). The hub uses it for "now" before it has been fed
	// anything. Optional: nil means 0. Must be safe for concurrent use.
	Applied func() uint64
}

// DefaultConfig returns 10,000 events and 16 MiB of history, 10,000
// watchers and a 1,024-event buffer per watcher.
func DefaultConfig() Config {
	return Config{MaxHistoryEntries: 10_000, MaxHistoryBytes: 16 << 20, MaxWatchers: 10_000, BufferEvents: 1024}
}

// Validate returns an error wrapping core.ErrInvalidArgument for a bound
// below its minimum.
func (c Config) Validate() error {
	if c.MaxHistoryEntries < 1 || c.MaxHistoryBytes < 1 || c.BufferEvents < 1 || c.MaxWatchers < 0 {
		return fmt.Errorf("%w: watch limits: history entries %d, history bytes %d, buffer %d must be ≥ 1 and max watchers %d ≥ 0",
			core.ErrInvalidArgument, c.MaxHistoryEntries, c.MaxHistoryBytes, c.BufferEvents, c.MaxWatchers)
	}
	return nil
}

// Hub is one node's event history and watcher fan-out. Apply is called from
// the backend's apply goroutine; every other method is safe for concurrent
// use from any goroutine.
type Hub struct {
	cfg Config

	mu        sync.Mutex
	hist      []Event // retained events in index order; hist[head:] is live
	head      int
	bytes     int64      // approximate size of hist[head:]
	floor     uint64     // every event at or after floor is retained; 0: nothing fed yet
	last      uint64     // highest index fed
	lastToken uint64     // token of the last created grant fed (gap detection)
	watchers  []*Watcher // registered watchers; w.slot is w's position
	// byPrincipal counts the registered watchers per principal
	// (Request.Principal; "" is not counted).
	byPrincipal map[string]int
	scratch     []Event // the events of the entry being applied (reused)
	closed      bool

	dropped atomic.Uint64
}

// New returns a hub with cfg's bounds. Errors: cfg.Validate's.
func New(cfg Config) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Applied == nil {
		cfg.Applied = func() uint64 { return 0 }
	}
	return &Hub{cfg: cfg, byPrincipal: map[string]int{}}, nil
}

// Apply records the entry applied at index and hands its events
// (AppendEvents: one, or one per holder of an ended session) to every
// watcher whose prefix matches. Call it for every applied entry, in log
// order, from the apply goroutine. It never blocks on a watcher: an entry's
// events reach each watcher all or none, and one whose buffer has no room for
// all of them is ended with ErrSlow before the first (so it resumes from that
// index without a gap). An index at or below the last one fed is ignored
// (replay).
//
// Tokens of created grants increase by exactly one
// (docs/design.md#replicated-commands); a jump means the node skipped entries (it installed a snapshot
// from the leader), so the history before it is dropped and every watcher is
// ended with a *CompactedError: none of them may miss an event silently.
func (h *Hub) Apply(index uint64, cmd core.Command, res core.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || index <= h.last {
		return
	}
	h.scratch = AppendEvents(h.scratch[:0], index, cmd, res)
	if len(h.scratch) == 1 && h.scratch[0].Type == Granted {
		if tok := h.scratch[0].Token; h.lastToken != 0 && tok != h.lastToken+1 {
			h.resetLocked(index - 1)
		}
		h.lastToken = h.scratch[0].Token
	}
	if h.floor == 0 {
		h.floor = index
	}
	h.last = index
	for _, ev := range h.scratch {
		h.hist = append(h.hist, ev)
		h.bytes += ev.size()
	}
	h.trimLocked()
	if len(h.scratch) > 0 {
		h.fanOutLocked(index, h.scratch)
	}
}

// fanOutLocked hands the events of the entry at index to every watcher, all
// or none: each watcher gets the events whose key matches its prefix, and one
// whose buffer has no room for all of them is ended with ErrSlow before any
// of them, so that resuming from index misses nothing (a watcher never holds
// part of an entry). Only Apply sends on a watcher's channel, under h.mu, so
// the room counted here can only grow until the sends.
func (h *Hub) fanOutLocked(index uint64, evs []Event) {
	for i := 0; i < len(h.watchers); i++ {
		w := h.watchers[i]
		if index < w.start {
			continue
		}
		n := 0
		for _, ev := range evs {
			if strings.HasPrefix(ev.Key, w.prefix) {
				n++
			}
		}
		if n == 0 {
			continue
		}
		if cap(w.ch)-len(w.ch) < n {
			h.dropped.Add(1)
			h.endLocked(w, ErrSlow)
			i-- // the last watcher moved into slot i
			continue
		}
		for _, ev := range evs {
			if strings.HasPrefix(ev.Key, w.prefix) {
				w.ch <- ev
			}
		}
	}
}

// Restored tells the hub that the state machine was replaced by a snapshot
// at index (installed from the leader; the server calls it from the
// backend's OnRestore hook, before the next Apply): the history is dropped
// and every watcher ends with a *CompactedError, since events up to index
// never reached the hub. This catches every gap, whatever the skipped
// entries were; the token check in Apply only catches gaps with a grant.
// An index at or below the last one fed changes nothing.
func (h *Hub) Restored(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if index > h.last {
		h.resetLocked(index)
		h.lastToken = 0
	}
}

// resetLocked drops the history: events after index are the next retained.
func (h *Hub) resetLocked(index uint64) {
	h.hist, h.head, h.bytes = nil, 0, 0
	h.floor, h.last = index+1, index
	for len(h.watchers) > 0 {
		w := h.watchers[len(h.watchers)-1]
		h.endLocked(w, &CompactedError{StartIndex: w.start, OldestIndex: h.floor})
	}
}

// trimLocked drops the oldest entries, each with all its events, while the
// history is beyond its event or byte bound; the newest entry is always kept
// whole, however large, so that a watcher ended as too slow in it can resume
// from its index. Called with h.hist non-empty or h.bytes zero.
func (h *Hub) trimLocked() {
	for len(h.hist)-h.head > h.cfg.MaxHistoryEntries || h.bytes > h.cfg.MaxHistoryBytes {
		oldest := h.hist[h.head].Index
		if oldest == h.hist[len(h.hist)-1].Index {
			break
		}
		for h.head < len(h.hist) && h.hist[h.head].Index == oldest {
			h.bytes -= h.hist[h.head].size()
			h.hist[h.head] = Event{}
			h.head++
		}
		h.floor = oldest + 1
	}
	if h.head > 64 && h.head > (len(h.hist)-h.head) {
		// Move the live events to the front of the same array: a new one
		// sized to them would fill up and be copied again at the next
		// append, an allocation and a copy of the whole history every
		// MaxHistoryEntries entries on every node. Every reader copies
		// what it takes under h.mu (Watch's backlog), so nothing else
		// holds the old positions.
		n := copy(h.hist, h.hist[h.head:])
		clear(h.hist[n:]) // no stale strings kept alive behind len
		h.hist, h.head = h.hist[:n], 0
	}
}

// oldestLocked is the oldest index a watch may start from.
func (h *Hub) oldestLocked() uint64 {
	if h.floor == 0 {
		return h.cfg.Applied() + 1
	}
	return h.floor
}

// OldestIndex returns the oldest index a watch can start from on this node:
// every event at or after it is retained.
func (h *Hub) OldestIndex() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.oldestLocked()
}

// Request is what a watcher asks for.
type Request struct {
	// Prefix selects the keys watched ("" is every key).
	Prefix string
	// StartIndex is the first log index whose event is wanted; 0 means
	// after the node's current applied index (only changes from now on).
	StartIndex uint64
	// Snapshot, if set, reads the current locks (include_existing) and
	// returns the log index they were read at; the watch then starts right
	// after it and StartIndex is ignored. It is called under the hub's lock,
	// so no event is fed meanwhile (apply waits for it, as it waits for the
	// state machine's own read lock during the read): snapshot and events
	// neither overlap nor leave a gap. It must not call the hub.
	Snapshot func() uint64
	// Principal is the caller's principal ("" with authorization off: not
	// counted). The hub counts each principal's open watchers.
	Principal string
	// Admit, if set, is called with the number of watchers Principal has
	// open on this hub, under the hub's lock; a non-nil error refuses the
	// watch and Watch returns it (a per-principal quota,
	// docs/security.md#quotas). It must not call the hub.
	Admit func(open int) error
}

// Watch registers a watcher: its Backlog holds the retained events at or
// after StartIndex under Prefix, and its Events channel every later one.
// Errors: *CompactedError when StartIndex is older than the retained history,
// ErrTooManyWatchers at the cap, Admit's error, ErrClosed after Close.
func (h *Hub) Watch(req Request) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.cfg.MaxWatchers > 0 && len(h.watchers) >= h.cfg.MaxWatchers {
		return nil, fmt.Errorf("%w (%d)", ErrTooManyWatchers, h.cfg.MaxWatchers)
	}
	if req.Principal != "" && req.Admit != nil {
		if err := req.Admit(h.byPrincipal[req.Principal]); err != nil {
			return nil, err
		}
	}
	start := req.StartIndex
	if req.Snapshot != nil {
		start = req.Snapshot() + 1
	}
	if start == 0 {
		start = max(h.last, h.cfg.Applied()) + 1
	}
	if oldest := h.oldestLocked(); start < oldest {
		return nil, &CompactedError{StartIndex: start, OldestIndex: oldest}
	}
	live := h.hist[h.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].Index >= start })
	var backlog []Event
	for _, ev := range live[i:] {
		if strings.HasPrefix(ev.Key, req.Prefix) {
			backlog = append(backlog, ev)
		}
	}
	w := &Watcher{
		hub: h, prefix: req.Prefix, principal: req.Principal, start: start, backlog: backlog,
		ch: make(chan Event, h.cfg.BufferEvents), done: make(chan struct{}),
	}
	w.slot = len(h.watchers)
	h.watchers = append(h.watchers, w)
	if w.principal != "" {
		h.byPrincipal[w.principal]++
	}
	return w, nil
}

// endLocked ends w with err (once) and forgets it.
func (h *Hub) endLocked(w *Watcher, err error) {
	if w.slot < 0 {
		return
	}
	last := len(h.watchers) - 1
	h.watchers[w.slot] = h.watchers[last]
	h.watchers[w.slot].slot = w.slot
	h.watchers[last] = nil
	h.watchers = h.watchers[:last]
	w.slot = -1
	w.err = err
	close(w.done)
	if w.principal != "" {
		if h.byPrincipal[w.principal]--; h.byPrincipal[w.principal] <= 0 {
			delete(h.byPrincipal, w.principal)
		}
	}
}

// Close ends every watcher with ErrClosed and refuses new ones: call it when
// the node shuts down, before waiting for its streams to finish.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for len(h.watchers) > 0 {
		h.endLocked(h.watchers[len(h.watchers)-1], ErrClosed)
	}
}

// EndAll ends every open watcher with err (for instance ErrCredentialsChanged
// after a policy reload, so that each client is authorized again when it
// resumes) and keeps accepting new ones.
func (h *Hub) EndAll(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.watchers) > 0 {
		h.endLocked(h.watchers[len(h.watchers)-1], err)
	}
}

// Watchers returns the number of watchers open.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

// PrincipalWatchers returns the number of watchers principal has open.
func (h *Hub) PrincipalWatchers(principal string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byPrincipal[principal]
}

// PrincipalCounts returns a copy of the open watchers per principal.
func (h *Hub) PrincipalCounts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.byPrincipal)
}

// Dropped returns how many watchers were ended with ErrSlow since New.
func (h *Hub) Dropped() uint64 { return h.dropped.Load() }

// Watcher is one registered watch. Its methods are safe for concurrent use;
// one goroutine reads its events.
type Watcher struct {
	hub       *Hub
	prefix    string
	principal string // Request.Principal, counted in hub.byPrincipal while registered
	start     uint64
	backlog   []Event
	ch        chan Event
	done      chan struct{}
	slot      int   // index in hub.watchers; -1 once ended (under hub.mu)
	err       error // set under hub.mu before done is closed
}

// StartIndex is the first index this watcher reports.
func (w *Watcher) StartIndex() uint64 { return w.start }

// Backlog returns the retained events the watcher starts with, in index
// order; send them before anything from Events.
func (w *Watcher) Backlog() []Event { return w.backlog }

// Events delivers the events applied after Watch, in index order. Events
// still buffered when Done closes are valid and come before the gap: drain
// them before reporting Err.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Done is closed when the hub ends the watcher (Err says why) or Close is called.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err says why the watcher ended: ErrSlow, ErrClosed, a *CompactedError, or
// nil (still open, or closed by its owner).
func (w *Watcher) Err() error {
	select {
	case <-w.done:
	default:
		return nil
	}
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	return w.err
}

// Close unregisters the watcher (the client went away). Safe to call more
// than once and after the hub ended it.
func (w *Watcher) Close() {
	w.hub.mu.Lock()
	defer w.hub.mu.Unlock()
	w.hub.endLocked(w, nil)
}
