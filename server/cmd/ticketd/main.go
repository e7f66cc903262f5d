package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/buildinfo"
)

// version is the release version, set at link time with
// -ldflags "-X main.version=v1.2.3" (make release, make build on a tag).
var version string

func main() {
	restrictUmask()
	server.Version = buildinfo.Read(version).Version
	if err := rootCmd().Execute(); err != nil {
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ticketd",
		Short:         "ticketd: a replicated lock service with fencing tokens",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(serveCmd(), restoreCmd(), versionCmd())
	return root
}

// versionCmd prints the module version, VCS revision and Go version
// (buildinfo).
func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version of this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Read(version).String("ticketd"))
		},
	}
}
