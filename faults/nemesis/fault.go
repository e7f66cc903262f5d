package nemesis

import (
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// Kind names a kind of fault.
type Kind string

// The process and link faults every run draws from (docs/faults.md).
const (
	// KillNode: kill -9 a random node, restart it after Duration.
	KillNode Kind = "kill-node"
	// KillLeader: kill -9 the leader, restart it after Duration.
	KillLeader Kind = "kill-leader"
	// PauseNode: SIGSTOP a random node for Duration (longer than the election timeout), then SIGCONT.
	PauseNode Kind = "pause-node"
	// PauseLeader: SIGSTOP the leader for Duration (longer than the election timeout).
	PauseLeader Kind = "pause-leader"
	// PauseLeaderLease: SIGSTOP the leader for Duration, longer than a lease:
	// a stalled leader wakes up after its locks' deadlines passed.
	PauseLeaderLease Kind = "pause-leader-lease"
	// IsolateLeader: cut every link to and from the leader for Duration.
	IsolateLeader Kind = "isolate-leader"
	// PartitionHalves: split the nodes into a random minority and majority for Duration.
	PartitionHalves Kind = "partition-majority-minority"
	// OneWayFromLeader: drop the leader's messages to the others (not the
	// other way) for Duration.
	OneWayFromLeader Kind = "one-way-from-leader"
	// OneWayToLeader: drop the others' messages to the leader (not the
	// other way) for Duration.
	OneWayToLeader Kind = "one-way-to-leader"
	// TransferLeader: ask the leader to hand leadership to another voter.
	TransferLeader Kind = "transfer-leader"
	// RemoveReAdd: remove a random node from the configuration, add it back
	// after Duration (same id, addresses and data).
	RemoveReAdd Kind = "remove-readd"
	// RestartAll: kill -9 every node at once, then start them all again.
	RestartAll Kind = "restart-all"
)

// Kinds lists every Kind, in the order a schedule cycles through them
// (shuffled per cycle).
var Kinds = []Kind{
	KillNode, KillLeader, PauseNode, PauseLeader, PauseLeaderLease,
	IsolateLeader, PartitionHalves, OneWayFromLeader, OneWayToLeader,
	TransferLeader, RemoveReAdd, RestartAll,
}

// Fault is one scheduled fault.
type Fault struct {
	// At is when the fault starts, as an offset from the start of the run.
	At   time.Duration
	Kind Kind
	// Duration is how long the fault is held before it is healed (0 for
	// TransferLeader and RestartAll, which are instantaneous).
	Duration time.Duration
	// Pick chooses among candidate nodes (random node, minority members):
	// the Executor takes candidates[Pick % len(candidates)], and so on.
	Pick int
}

// String formats f as one line: "  12.500s kill-leader for 1.2s (pick 7)".
func (f Fault) String() string {
	return fmt.Sprintf("%9.3fs %s for %v (pick %d)", f.At.Seconds(), f.Kind, f.Duration, f.Pick)
}

// Schedule is a seeded, ordered list of faults; faults never overlap.
type Schedule struct {
	// Seed is the seed the schedule was generated from.
	Seed int64
	// Faults are in order of At.
	Faults []Fault
}

// String prints the seed and one fault per line.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d faults\n", s.Seed, len(s.Faults))
	for _, f := range s.Faults {
		b.WriteString(f.String())
		b.WriteString("\n")
	}
	return b.String()
}

// Config shapes a Schedule.
type Config struct {
	// Nodes is the cluster size (3 or 5).
	Nodes int
	// Length is how long the faulty part of the run lasts; no fault starts
	// or is held past it.
	Length time.Duration
	// ElectionTimeout is the cluster's election timeout: pauses and
	// partitions last longer than it, so that elections happen.
	ElectionTimeout time.Duration
	// Lease is the longest lease the workload takes: PauseLeaderLease lasts
	// longer than it.
	Lease time.Duration
	// Warmup is the quiet time before the first fault; default 2s.
	Warmup time.Duration
	// Gap is the minimum quiet time between two faults, so the cluster can
	// recover and serve; default 1s (up to twice that, at random).
	Gap time.Duration
	// Kinds restricts the faults to these kinds; empty means all of Kinds.
	Kinds []Kind
}

func (c Config) withDefaults() Config {
	if c.Warmup == 0 {
		c.Warmup = 2 * time.Second
	}
	if c.Gap == 0 {
		c.Gap = time.Second
	}
	if len(c.Kinds) == 0 {
		c.Kinds = Kinds
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = time.Second
	}
	if c.Lease == 0 {
		c.Lease = 2 * time.Second
	}
	return c
}

// between returns a random duration in [lo, hi).
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int63n(int64(hi-lo)))
}

// duration draws how long a fault of kind k is held.
func (c Config) duration(rng *rand.Rand, k Kind) time.Duration {
	et := c.ElectionTimeout
	switch k {
	case KillNode, KillLeader:
		return between(rng, et, 4*et)
	case PauseNode, PauseLeader:
		return between(rng, 2*et, 4*et) // > the election timeout, even randomised up to 2x
	case PauseLeaderLease:
		return between(rng, c.Lease+c.Lease/4, 2*c.Lease)
	case IsolateLeader, PartitionHalves, OneWayFromLeader, OneWayToLeader, LinkDown, LinkDownLeader, FlapLink:
		return between(rng, 2*et, 5*et)
	case RemoveReAdd:
		return between(rng, et, 3*et)
	case DamageLog, DiskFull:
		return between(rng, 2*et, 4*et)
	}
	return 0
}

// Generate returns the schedule of seed under cfg: faults cycle through
// cfg.Kinds in an order shuffled anew each cycle (so a short run still sees
// many kinds), each held for a random duration suited to its kind and
// followed by a random gap. The same seed and cfg give the same Schedule.
func Generate(seed int64, cfg Config) Schedule {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewSource(seed))
	s := Schedule{Seed: seed}
	at := cfg.Warmup
	var cycle []Kind
	for {
		if len(cycle) == 0 {
			cycle = append([]Kind(nil), cfg.Kinds...)
			rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		k := cycle[0]
		cycle = cycle[1:]
		f := Fault{At: at, Kind: k, Duration: cfg.duration(rng, k), Pick: rng.Intn(1 << 20)}
		if f.At+f.Duration > cfg.Length {
			return s
		}
		s.Faults = append(s.Faults, f)
		at = f.At + f.Duration + between(rng, cfg.Gap, 2*cfg.Gap)
	}
}
