package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/snapfile"
)

// snapshotJSON is what "snapshot save" and "snapshot status" print.
type snapshotJSON struct {
	File          string `json:"file"`
	FormatVersion uint32 `json:"formatVersion"`
	Backend       string `json:"backend"`
	NodeID        string `json:"nodeId"`
	Index         uint64 `json:"index,string"`
	Term          uint64 `json:"term,string"`
	LastToken     uint64 `json:"lastToken,string"`
	LocksHeld     int64  `json:"locksHeld,string"`
	SizeBytes     uint64 `json:"sizeBytes,string"`
	SHA256        string `json:"sha256"`
	Created       string `json:"created"`
	Verified      bool   `json:"verified"`
}

// value is what -o value prints: the snapshot's SHA-256 (hex).
func (s snapshotJSON) value() string { return s.SHA256 }

func snapshotOf(file string, h *ticketv1.SnapshotHeader) snapshotJSON {
	return snapshotJSON{
		File: file, FormatVersion: h.GetFormatVersion(), Backend: h.GetBackend(), NodeID: h.GetNodeId(),
		Index: h.GetIndex(), Term: h.GetTerm(), LastToken: h.GetLastToken(), LocksHeld: h.GetLocksHeld(),
		SizeBytes: h.GetSizeBytes(), SHA256: hex.EncodeToString(h.GetSha256()),
		Created: time.UnixMilli(h.GetCreatedUnixMs()).UTC().Format(time.RFC3339), Verified: true,
	}
}

func printSnapshot(w io.Writer, v any) {
	s := v.(snapshotJSON)
	fmt.Fprintf(w, "file:        %s\n", s.File)
	fmt.Fprintf(w, "format:      %d\n", s.FormatVersion)
	fmt.Fprintf(w, "backend:     %s (taken on %s at %s)\n", s.Backend, s.NodeID, s.Created)
	fmt.Fprintf(w, "index:       %d (term %d)\n", s.Index, s.Term)
	fmt.Fprintf(w, "last token:  %d\n", s.LastToken)
	fmt.Fprintf(w, "locks held:  %d\n", s.LocksHeld)
	fmt.Fprintf(w, "size:        %d bytes\n", s.SizeBytes)
	fmt.Fprintf(w, "sha256:      %s (verified)\n", s.SHA256)
}

// newSnapshotCmd builds "snapshot save|status" (etcdctl snapshot save,
// etcdutl snapshot status).
func newSnapshotCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the lock table (save) and inspect a backup (status)",
	}
	save := &cobra.Command{
		Use:   "save FILE",
		Short: "Stream a consistent snapshot from the leader into FILE (admin)",
		Long: `Stream a consistent snapshot of the lock table from the leader into FILE,
verify its checksum, and write it atomically (FILE appears only when complete).
Restore a cluster from it with 'ticketd restore --snapshot FILE' on every member.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				h, data, err := c.Snapshot(ctx)
				if err != nil {
					return nil, err
				}
				if err := snapfile.Verify(h, data); err != nil {
					return nil, err
				}
				if err := writeSnapshotFile(file, h, data); err != nil {
					return nil, err
				}
				return snapshotOf(file, h), nil
			}, printSnapshot)
		},
	}
	status := &cobra.Command{
		Use:   "status FILE",
		Short: "Print a snapshot file's header and verify its checksum",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			h, _, err := snapfile.Read(f, 0)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return g.print(snapshotOf(args[0], h), printSnapshot)
		},
	}
	cmd.AddCommand(save, status)
	return cmd
}

// writeSnapshotFile writes the snapshot file through a synced temporary
// file in the same directory, renamed over file once complete.
func writeSnapshotFile(file string, h *ticketv1.SnapshotHeader, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".part*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	err = snapfile.WriteHeader(tmp, h)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return os.Rename(tmp.Name(), file)
}
