// Package backends holds what every consensus backend of ticketd shares: the
// Config that New takes. The adapters live in sub-packages — hashicorp (over
// github.com/hashicorp/raft) and etcd (over go.etcd.io/raft/v3) — both storing
// their log and stable state in the log store Config.LogStore names
// (LogStoreWAL, the library's own write-ahead log, by default for a new data
// dir; LogStoreBadger, badger/v4),
// and both meeting core.Consensus and core.Membership. backendtest is the
// conformance suite every adapter passes, with every log store.
//
// # Usage
//
//  1. Make a core.StateMachine and a Config (ID, RaftAddr, DataDir, Bootstrap
//     for a new cluster, StateMachine, the OnApply, OnRestore and
//     OnLeaderChange hooks).
//  2. Call hashicorp.New(cfg) or etcd.New(cfg); both return a node that is a
//     core.Consensus and a core.Membership.
//  3. Propose commands on the leader; follow OnLeaderChange to learn when this
//     node leads (after its barrier); Close on shutdown.
//
// # Disaster recovery
//
// Each backend has a Restore (a RestoreFunc) that writes a new cluster's
// data from a core snapshot (LoadRestore: the index moves one past the
// snapshot's, the token counter carries over), and honours
// Config.ForceNewCluster: a survivor of quorum loss rewrites its own state
// as a one-member cluster (hashicorp RecoverCluster; etcd's
// --force-new-cluster). Config.Observer receives storage and proposal
// timings for metrics.
package backends
