package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/snapfile"
)

// restoreCmd is `ticketd restore`: the data of one member of a new cluster
// from a snapshot file (etcdutl snapshot restore).
func restoreCmd() *cobra.Command {
	var configPath, snapshotPath string
	cmd := &cobra.Command{
		Use:   "restore --snapshot FILE --data-dir DIR --id ID --bootstrap MEMBERS",
		Short: "Create a new cluster's data from a snapshot file (ticketctl snapshot save)",
		Long: `Create, in --data-dir (which must not hold Raft state), the data of member
--id of a new cluster whose voters are --bootstrap, from a snapshot file written
by 'ticketctl snapshot save'. Run it on every member with the same file and the
same --bootstrap, then start each with 'ticketd serve'. The Raft log is
written in --raft-log-store (badger or wal), so a snapshot and a restore also
move a cluster from one log store to the other. Every lock and the
token counter carry over: the next token is above every token in the snapshot.
The file's checksum is verified first; a damaged file changes nothing.

Configuration is read as for 'ticketd serve' (--config, TICKETD_*, flags).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if snapshotPath == "" {
				return fmt.Errorf("--snapshot FILE is required")
			}
			if configPath == "" {
				configPath = os.Getenv(config.EnvPrefix + "CONFIG")
			}
			cfg, err := config.Load(configPath, nil, cmd.Flags())
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			f, err := os.Open(snapshotPath)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			h, data, err := snapfile.Read(f, 0)
			if err != nil {
				return fmt.Errorf("%s: %w", snapshotPath, err)
			}
			// An unset raft.log_store restores into the default store (the
			// target data dir holds no log, or Restore refuses it).
			cfg.Raft.LogStore = backends.ResolveLogStore(cfg.DataDir, cfg.Raft.LogStore)
			if err := server.Restore(cfg, h, data, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s as member %s of a new %s cluster (log store %s) of %d voters: index %d, %d locks, last token %d\n",
				cfg.DataDir, cfg.ID, cfg.Backend, cfg.Raft.LogStore, len(cfg.Members()), h.GetIndex(), h.GetLocksHeld(), h.GetLastToken())
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "YAML configuration file (env TICKETD_CONFIG)")
	cmd.Flags().StringVar(&snapshotPath, "snapshot", "", "snapshot file written by 'ticketctl snapshot save'")
	config.RegisterFlags(cmd.Flags())
	return cmd
}
