package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
)

// shutdownTimeout bounds the graceful part of a shutdown.
const shutdownTimeout = 10 * time.Second

// Sentinel errors of ticketd serve.
var (
	// errFatal: the node's Raft stopped on a fatal error; the process exits non-zero.
	errFatal = errors.New("ticketd: raft stopped on a fatal error")
)

// serveMetrics serves /metrics, /livez and /readyz of node on their own
// listener at addr (listen_metrics_addr), without client certificates
// (server.Node.ServeMetrics); a Serve failure goes to errs. The node's
// Close stops it.
func serveMetrics(addr string, node *server.Node, log *zap.Logger, errs chan<- error) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on listen_metrics_addr: %w", err)
	}
	go func() {
		if err := node.ServeMetrics(ln); !errors.Is(err, http.ErrServerClosed) {
			select {
			case errs <- fmt.Errorf("metrics listener: %w", err):
			default:
			}
		}
	}()
	scheme := "http"
	if node.MetricsTLS() {
		scheme = "https"
	}
	log.Info("metrics and probes on their own listener (no client certificate)",
		zap.String("listen_metrics_addr", addr), zap.String("scheme", scheme))
	return nil
}

func serveCmd() *cobra.Command {
	var configPath string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a ticketd node",
		Long: `Run a ticketd node until SIGINT or SIGTERM.

Configuration comes from, lowest precedence first: built-in defaults, the YAML
file given by --config (or TICKETD_CONFIG), TICKETD_* environment variables,
and the flags below. A node whose data directory holds no Raft state starts a
new cluster with --bootstrap (or alone, without --bootstrap and --join), or
asks the member at --join to add it. Before it bootstraps an empty data
directory it asks the other --bootstrap members (up to 3 s) whether their
cluster already knows it, and refuses to start if one does: its data is
gone, so it must be removed and added back with --join
(docs/operations.md#replacing-a-member-whose-data-is-gone).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "YAML config file (env TICKETD_CONFIG)")
	config.RegisterFlags(cmd.Flags())
	return cmd
}

// newLogger builds the zap logger of cfg.Log.
func newLogger(c config.Log) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	// Production settings in both formats: development mode would attach a
	// stack trace to every warning (elections included) and panic on DPanic.
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc.Encoding = "console"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	// A stack trace only from DPanic up: production's default (Error and
	// up) printed one under every refusal at start (a missing watermark, a
	// damaged log), whose message already names the cause and the fix.
	return zc.Build(zap.AddStacktrace(zapcore.DPanicLevel))
}

// serve runs the node until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, cfg config.Config) error {
	log, err := newLogger(cfg.Log)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	// An unset raft.log_store is the data dir's own store, else the default:
	// resolved here so the start-up line names the store the node opens.
	cfg.Raft.LogStore = backends.ResolveLogStore(cfg.DataDir, cfg.Raft.LogStore)
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("listen on api_addr: %w", err)
	}
	node, err := server.New(cfg, append([]server.Option{server.WithLogger(log)}, extraOptions...)...)
	if err != nil {
		_ = ln.Close()
		return err
	}
	log.Info("ticketd serving", zap.String("version", server.Version), zap.String("node", cfg.ID),
		zap.String("api_addr", cfg.APIAddr), zap.String("raft_addr", cfg.RaftAddr),
		zap.String("backend", cfg.Backend), zap.String("log_store", cfg.Raft.LogStore), zap.String("data_dir", cfg.DataDir),
		zap.Int("pid", os.Getpid()))
	serveErr := make(chan error, 1)
	go func() { serveErr <- node.Serve(ln) }()
	if cfg.ListenMetricsAddr != "" {
		if err := serveMetrics(cfg.ListenMetricsAddr, node, log, serveErr); err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			return errors.Join(err, node.Close(sctx))
		}
	}
	var fatal error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-serveErr:
		log.Error("API server stopped", zap.Error(err))
	case fatal = <-node.Fatal():
		// Fail-stop: health already reports NOT_SERVING; exit non-zero at
		// once, without closing the node. Closing would flush badger's
		// memtable into a new table file, and when the fatal error is a
		// full disk that write dies of SIGBUS inside badger's mmap (a Go
		// crash dump, exit 2) and leaves a partial table. Nothing needs
		// the close: every acknowledged entry and the watermark are synced
		// before they are acknowledged, so the next start finds what a
		// kill -9 leaves (docs/design.md#storage-and-recovery, fail-stop).
		log.Error("raft stopped; exiting with status 1 without closing the storage", zap.Error(fatal))
		return fmt.Errorf("%w: %w", errFatal, fatal)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if cerr := node.Close(sctx); cerr != nil {
		log.Error("close", zap.Error(cerr))
		err = errors.Join(err, cerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("stopped")
	return err
}
