package hashicorp

import (
	"fmt"
	"io"
	"log"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// This file routes hashicorp/raft's logging (hclog) to zap.

// zapHCLog adapts a zap logger to hclog.Logger, the logger interface of
// hashicorp/raft, so the library logs where the rest of ticketd does.
// hclog's key/value pairs become typed zap fields; a trailing key without a
// value is kept as EXTRA_VALUE_AT_END, as hclog does (never zap's DPanic).
type zapHCLog struct {
	z    *zap.Logger
	name string
	args []any
}

var _ hclog.Logger = (*zapHCLog)(nil)

func newHCLog(z *zap.Logger) *zapHCLog { return &zapHCLog{z: z} }

func (l *zapHCLog) Log(level hclog.Level, msg string, args ...any) {
	var lvl zapcore.Level
	switch level {
	case hclog.Trace, hclog.Debug:
		lvl = zapcore.DebugLevel
	case hclog.Info:
		lvl = zapcore.InfoLevel
	case hclog.Warn:
		lvl = zapcore.WarnLevel
	case hclog.Error:
		lvl = zapcore.ErrorLevel
	default:
		return
	}
	if ce := l.z.Check(lvl, msg); ce != nil {
		ce.Write(fields(args)...)
	}
}

// fields turns hclog's alternating keys and values into zap fields.
func fields(args []any) []zap.Field {
	out := make([]zap.Field, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, zap.Any("EXTRA_VALUE_AT_END", args[i]))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		out = append(out, field(key, args[i+1]))
	}
	return out
}

// field is one zap field; hclog's formatting wrappers are rendered the way
// hclog renders them (hclog.Fmt's Format is a format string and its
// arguments: logging it as is would print `["%+v", ...]`).
func field(key string, v any) zap.Field {
	if f, ok := v.(hclog.Format); ok && len(f) > 0 {
		if format, ok := f[0].(string); ok {
			return zap.String(key, fmt.Sprintf(format, f[1:]...))
		}
	}
	return zap.Any(key, v)
}

func (l *zapHCLog) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *zapHCLog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *zapHCLog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *zapHCLog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *zapHCLog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *zapHCLog) IsTrace() bool { return l.z.Core().Enabled(zapcore.DebugLevel) }
func (l *zapHCLog) IsDebug() bool { return l.z.Core().Enabled(zapcore.DebugLevel) }
func (l *zapHCLog) IsInfo() bool  { return l.z.Core().Enabled(zapcore.InfoLevel) }
func (l *zapHCLog) IsWarn() bool  { return l.z.Core().Enabled(zapcore.WarnLevel) }
func (l *zapHCLog) IsError() bool { return l.z.Core().Enabled(zapcore.ErrorLevel) }

func (l *zapHCLog) ImpliedArgs() []any { return l.args }

func (l *zapHCLog) With(args ...any) hclog.Logger {
	return &zapHCLog{z: l.z.With(fields(args)...), name: l.name, args: append(append([]any(nil), l.args...), args...)}
}

func (l *zapHCLog) Name() string { return l.name }

func (l *zapHCLog) Named(name string) hclog.Logger {
	full := name
	if l.name != "" {
		full = l.name + "." + name
	}
	return &zapHCLog{z: l.z.Named(name), name: full, args: l.args}
}

func (l *zapHCLog) ResetNamed(name string) hclog.Logger {
	return &zapHCLog{z: l.z.Named(name), name: name, args: l.args}
}

// SetLevel is ignored: the level is the zap logger's.
func (l *zapHCLog) SetLevel(hclog.Level) {}

func (l *zapHCLog) GetLevel() hclog.Level {
	switch {
	case l.IsDebug():
		return hclog.Debug
	case l.IsInfo():
		return hclog.Info
	case l.IsWarn():
		return hclog.Warn
	}
	return hclog.Error
}

func (l *zapHCLog) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return zap.NewStdLog(l.z)
}

func (l *zapHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return zap.NewStdLog(l.z).Writer()
}
