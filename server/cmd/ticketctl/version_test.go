package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionCommands builds ticketctl and ticketd as `make build` does
// (the revision passed with -X, and the version as make release passes it,
// -X main.version, since the toolchain cannot
// stamp them inside a linked git worktree) and checks that both "version"
// commands print the version, the revision and the Go version, and
// ticketctl's -o json the same fields.
func TestVersionCommands(t *testing.T) {
	dir := t.TempDir()
	const pkg = "github.com/ticketd/ticketd/server/buildinfo"
	ldflags := "-X " + pkg + ".revision=0123456789abcdef -X main.version=v9.8.7"
	for _, name := range []string{"ticketctl", "ticketd"} {
		out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", filepath.Join(dir, name),
			"github.com/ticketd/ticketd/server/cmd/"+name).CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(filepath.Join(dir, name), "version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Equal(t, name+" v9.8.7 (revision 0123456789abcdef, "+runtime.Version()+")\n", string(out))
	}
	out, err := exec.Command(filepath.Join(dir, "ticketctl"), "-o", "json", "version").Output()
	require.NoError(t, err)
	var v struct {
		Version, Revision, GoVersion string
		Modified                     bool
	}
	require.NoError(t, json.Unmarshal(out, &v), "%s", out)
	assert.Equal(t, "v9.8.7", v.Version)
	assert.Equal(t, "0123456789abcdef", v.Revision)
	assert.Equal(t, runtime.Version(), v.GoVersion)

	// Without -X, in a build the toolchain stamps (go build -buildvcs=true
	// in a git checkout), the revision comes from the build info; where it
	// cannot, "unknown" is said rather than an empty field.
	out, err = exec.Command("go", "build", "-o", filepath.Join(dir, "plain"), ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(filepath.Join(dir, "plain"), "version").Output()
	require.NoError(t, err)
	assert.Regexp(t, `^ticketctl \S+ \(revision (unknown|[0-9a-f]{40})(, modified)?, go`, string(out))
}
