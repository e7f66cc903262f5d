// Package snapfile is the on-disk form of a ticketd backup: the file
// `ticketctl snapshot save` writes from ClusterService.Snapshot and
// `ticketd restore` reads (etcdctl snapshot save / etcdutl snapshot restore).
//
// A file is:
//
//	8 bytes   Magic ("TKTDSNAP")
//	4 bytes   big-endian length of the header
//	header    a deterministically marshalled ticket.v1.SnapshotHeader
//	data      the core snapshot bytes (core.Snapshot.WriteTo), SizeBytes long
//
// The header's Sha256 covers data; core's own CRC-32C inside data covers it
// again, and Read checks both, so a file cut short or changed is refused
// before anything is restored from it.
//
// # Usage
//
//  1. On the leader, after a ReadIndex, write the state machine's snapshot
//     to a buffer and call NewHeader on it; fill in Backend, Term, NodeId.
//  2. Stream the header, then the data (ClusterService.Snapshot).
//  3. On the client, Write the header and the data into a file.
//  4. To restore, Read the file: it returns the verified header and data,
//     which a backend's Restore takes.
//
// Example:
//
//	h, data, err := snapfile.Read(f)
//	if err != nil {
//		return err // damaged or not a snapshot file
//	}
//	err = hashicorp.Restore(cfg, bytes.NewReader(data))
package snapfile
