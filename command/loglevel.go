package command

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// logLevel is the writer under serve's logger: it drops lines below the
// level in force, which SIGHUP may change (reloadLogLevel). The logger
// itself is built at debug level, so that a line is kept or dropped here;
// the server logs at debug only per connection, not per command.
type logLevel struct {
	w   io.Writer
	min atomic.Int32 // a zerolog.Level
}

func (l *logLevel) set(lvl zerolog.Level) { l.min.Store(int32(lvl)) }
func (l *logLevel) get() zerolog.Level    { return zerolog.Level(l.min.Load()) }

func (l *logLevel) Write(p []byte) (int, error) { return l.w.Write(p) }

// WriteLevel is zerolog.LevelWriter's: zerolog calls it for every line.
func (l *logLevel) WriteLevel(lvl zerolog.Level, p []byte) (int, error) {
	if lvl < l.get() {
		return len(p), nil
	}
	return l.w.Write(p)
}

func parseLogLevel(level string) (zerolog.Level, error) {
	levels := map[string]zerolog.Level{
		"debug": zerolog.DebugLevel, "info": zerolog.InfoLevel,
		"warn": zerolog.WarnLevel, "error": zerolog.ErrorLevel,
	}
	lvl, ok := levels[strings.ToLower(level)]
	if !ok {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	return lvl, nil
}

// reloadLogLevel is the SIGHUP reload of the --config file's log-level
// (info when the file has none): it logs the change, if any, at the level
// it leaves in force and at warn, so that the line is seen either way. A
// file that no longer reads, or a bad level, keeps the level in force.
func reloadLogLevel(file string, lv *logLevel, log zerolog.Logger) reload {
	return reload{"config file log-level", func() error {
		values, err := readConfigFile(file, configurable(serveFlags()))
		if err != nil {
			return err
		}
		name := "info"
		if v, ok := values["log-level"]; ok {
			name = fmt.Sprint(v)
		}
		lvl, err := parseLogLevel(name)
		if err != nil {
			return err
		}
		if old := lv.get(); old != lvl {
			lv.set(lvl)
			log.WithLevel(max(lvl, zerolog.WarnLevel)).Str("from", old.String()).Str("to", lvl.String()).Msg("SIGHUP: log level changed")
		}
		return nil
	}}
}
