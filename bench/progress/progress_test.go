package progress_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/bench/progress"
)

func TestLinePlainWriter(t *testing.T) {
	var buf bytes.Buffer
	p := progress.New(&buf, 3)
	p.Step("round 1/1 · floor")
	p.Note("peer skipped")
	p.Skip(1)
	p.Step("round 1/1 · commit · hashicorp · 4 clients")
	p.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4)
	require.True(t, strings.HasPrefix(lines[0], "[1/3] round 1/1 · floor · elapsed "), lines[0])
	require.Contains(t, lines[0], "left ?")
	require.Equal(t, "peer skipped", lines[1])
	require.True(t, strings.HasPrefix(lines[2], "[3/3] round 1/1 · commit · hashicorp · 4 clients"), lines[2])
	require.Contains(t, lines[2], "left ~")
	require.True(t, strings.HasPrefix(lines[3], "done: 3 steps in "), lines[3])
	require.NotContains(t, buf.String(), "\r", "no carriage returns when not on a terminal")
}
