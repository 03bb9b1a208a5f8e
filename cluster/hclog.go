package cluster

import (
	"fmt"
	"io"
	"log"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// hclogAdapter lets hashicorp/raft, which logs through hclog.Logger, write
// to the node's zerolog.Logger. Key/value pairs become zerolog fields; raft
// passes them as alternating keys and values, with the odd one out (if any)
// kept under "extra".
type hclogAdapter struct {
	base    zerolog.Logger // the node's logger
	zl      zerolog.Logger // base with the component's name
	name    string
	implied []any
}

func newHclogAdapter(zl zerolog.Logger, name string) hclog.Logger {
	return &hclogAdapter{base: zl, zl: zl.With().Str("component", name).Logger(), name: name}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func (h *hclogAdapter) event(level hclog.Level) *zerolog.Event {
	switch level {
	case hclog.Trace:
		return h.zl.Trace()
	case hclog.Debug:
		return h.zl.Debug()
	case hclog.Info, hclog.NoLevel:
		return h.zl.Info()
	case hclog.Warn:
		return h.zl.Warn()
	case hclog.Error:
		return h.zl.Error()
	default:
		return nil
	}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	e := h.event(level)
	if e == nil {
		return
	}
	addFields(e, h.implied)
	addFields(e, args)
	e.Msg(msg)
}

func addFields(e *zerolog.Event, args []any) {
	for i := 0; i+1 < len(args); i += 2 {
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		switch v := args[i+1].(type) {
		case hclog.Format:
			e.Str(key, formatArg(v))
		case error:
			e.AnErr(key, v)
		case fmt.Stringer:
			e.Stringer(key, v)
		default:
			e.Interface(key, v)
		}
	}
	if len(args)%2 == 1 {
		e.Interface("extra", args[len(args)-1])
	}
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(l zerolog.Level) bool {
	return h.zl.GetLevel() <= l && zerolog.GlobalLevel() <= l
}

func (h *hclogAdapter) IsTrace() bool { return h.enabled(zerolog.TraceLevel) }
func (h *hclogAdapter) IsDebug() bool { return h.enabled(zerolog.DebugLevel) }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled(zerolog.InfoLevel) }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled(zerolog.WarnLevel) }
func (h *hclogAdapter) IsError() bool { return h.enabled(zerolog.ErrorLevel) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.implied }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	c := *h
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.zl = h.base.With().Str("component", name).Logger()
	return &c
}

// SetLevel is ignored: the level is the zerolog.Logger's, set by whoever
// built it, so that raft's lines obey the server's --log-level.
func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case h.IsTrace():
		return hclog.Trace
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	case h.IsError():
		return hclog.Error
	}
	return hclog.Off
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{h}
}

// stdWriter turns lines from a standard library *log.Logger (raft's
// dependencies use one) into info lines.
type stdWriter struct{ h *hclogAdapter }

func (w stdWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// formatArg renders raft's hclog.Fmt values (a format and its arguments).
func formatArg(v hclog.Format) string {
	if len(v) > 0 {
		if format, ok := v[0].(string); ok {
			return fmt.Sprintf(format, v[1:]...)
		}
	}
	return fmt.Sprint([]any(v)...)
}
