package etcd

import "go.uber.org/zap"

// raftLogger adapts a zap logger to raft.Logger. Fatal is logged as Panic so
// that the raft loop's recover turns it into a node failure instead of
// os.Exit killing the whole process.
type raftLogger struct{ *zap.SugaredLogger }

func (l raftLogger) Warning(v ...any)                 { l.Warn(v...) }
func (l raftLogger) Warningf(format string, v ...any) { l.Warnf(format, v...) }
func (l raftLogger) Fatal(v ...any)                   { l.Panic(v...) }
func (l raftLogger) Fatalf(format string, v ...any)   { l.Panicf(format, v...) }
