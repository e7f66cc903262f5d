package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/server/buildinfo"
)

// version is the release version, set at link time with
// -ldflags "-X main.version=v1.2.3" (make release, make build on a tag).
var version string

// newVersionCmd builds "version": the module version, VCS revision and Go
// version of this binary (buildinfo); -o json prints them as an object.
func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and Go version of this ticketctl",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Read(version)
			if g.output == outJSON {
				return json.NewEncoder(g.stdout).Encode(struct {
					Version   string `json:"version"`
					Revision  string `json:"revision"`
					Modified  bool   `json:"modified"`
					GoVersion string `json:"goVersion"`
				}{in.Version, in.Revision, in.Modified, in.GoVersion})
			}
			_, err := fmt.Fprintln(g.stdout, in.String("ticketctl"))
			return err
		},
	}
}
