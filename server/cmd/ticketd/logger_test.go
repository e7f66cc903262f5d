package main

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/config"
)

// TestErrorLogsCarryNoStackTrace: the node's logger writes an Error line
// (a refusal at start, say) without a stack trace in both formats; the
// message names the cause, and a trace only buries it.
func TestErrorLogsCarryNoStackTrace(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			r, w, err := os.Pipe()
			require.NoError(t, err)
			stderr := os.Stderr
			os.Stderr = w
			log, err := newLogger(config.Log{Level: "info", Format: format})
			os.Stderr = stderr
			require.NoError(t, err)
			log.Error("refused to start", zap.String("why", "its watermark file is missing"))
			_ = log.Sync()
			require.NoError(t, w.Close())
			out, err := io.ReadAll(r)
			require.NoError(t, err)
			require.Contains(t, string(out), "refused to start")
			require.NotContains(t, string(out), "stacktrace")
			require.NotContains(t, string(out), "testing.tRunner", "no stack frames after the line")
		})
	}
}
