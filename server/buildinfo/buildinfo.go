// Package buildinfo tells which build a ticketd or ticketctl binary is: its
// module version, VCS revision and Go version, for the "version" commands
// and the ticketd_build_info metric.
//
// The Go toolchain records the revision itself (runtime/debug.BuildInfo's
// vcs.* settings) when it builds inside a git checkout with -buildvcs on.
// It does not inside a linked git worktree (whose .git is a file, which the
// go command does not recognise as a repository) nor from a source tarball,
// so `make build` also passes the revision with
// -ldflags "-X github.com/ticketd/ticketd/server/buildinfo.revision=..."
// (and modified), used when the toolchain recorded none. The release
// version is each command's own main.version (-X main.version=v1.2.0, as
// `make release` sets it), which the command hands to Read.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time with -ldflags -X (see the package comment); empty when
// not given.
var (
	revision string // the full commit hash
	modified string // "true" when the tree had uncommitted changes
)

// Info describes a build.
type Info struct {
	// Version is the release version given at link time (the command's
	// main.version), else the main module's version from the build info
	// ("(devel)" for a local build), else "dev".
	Version string
	// Revision is the VCS commit the binary was built from, "" when
	// unknown.
	Revision string
	// Modified is set when the working tree had uncommitted changes.
	Modified bool
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Read returns this binary's build information; version is the release
// version the command was linked with (its main.version), "" when none.
func Read(version string) Info {
	in := Info{Version: version, Revision: revision, Modified: modified == "true", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if in.Version == "" {
			in.Version = "dev"
		}
		return in
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the line the version commands print: "NAME VERSION (revision
// REV[, modified], GOVERSION)", the revision "unknown" when none was
// recorded.
func (in Info) String(name string) string {
	rev := in.Revision
	if rev == "" {
		rev = "unknown"
	}
	if in.Modified {
		rev += ", modified"
	}
	return fmt.Sprintf("%s %s (revision %s, %s)", name, in.Version, rev, in.GoVersion)
}
