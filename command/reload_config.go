package command

import (
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/server"
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

// reloadConfigFile is the SIGHUP reload of the --config file's settings
// that can change while the server runs: log-level, max-clients,
// idle-timeout and maxmemory, each unless a flag or variable gave it
// (given). A key the file no longer has goes back to its default. It logs
// each change at warn or above, so that the line is seen at any level. A
// file that no longer reads, or a value that does not parse, keeps all that
// is in force: the file is read whole before anything changes.
func reloadConfigFile(file string, given func(name string) bool, lv *logLevel, srv *server.Server, log zerolog.Logger) reload {
	return reload{"config file", func() error {
		values, err := readConfigFile(file, configurable(serveFlags()))
		if err != nil {
			return err
		}
		// What a flag or variable gave is not the file's: its value there is
		// not read, as at start.
		for name := range values {
			if given(fmt.Sprint(name)) {
				delete(values, name)
			}
		}
		def := server.DefaultConfig()
		level, maxClients, idle, maxMemory := "info", def.MaxClients, def.IdleTimeout, def.MaxMemory
		if v, ok := values["log-level"]; ok {
			level = fmt.Sprint(v)
		}
		lvl, err := parseLogLevel(level)
		if err != nil {
			return err
		}
		if v, ok := values["max-clients"].(int); ok {
			maxClients = v
		}
		if v, ok := values["idle-timeout"]; ok {
			if idle, err = time.ParseDuration(fmt.Sprint(v)); err != nil || idle < 0 {
				return fmt.Errorf("config file %s: idle-timeout %q: want a duration of 0 or more (300s, 5m)", file, fmt.Sprint(v))
			}
		}
		if v, ok := values["maxmemory"]; ok {
			if maxMemory, err = limits.ParseMemory(fmt.Sprint(v)); err != nil {
				return fmt.Errorf("config file %s: maxmemory: %w", file, err)
			}
		}

		if old := lv.get(); !given("log-level") && old != lvl {
			lv.set(lvl)
			log.WithLevel(max(lvl, zerolog.WarnLevel)).Str("from", old.String()).Str("to", lvl.String()).Msg("SIGHUP: log level changed")
		}
		if !given("max-clients") {
			was, now, err := srv.SetMaxClients(maxClients)
			if err != nil {
				return err
			}
			if now != was {
				log.Warn().Int("from", was).Int("to", now).Msg("SIGHUP: max clients changed")
			}
		}
		if !given("idle-timeout") {
			was, err := srv.SetIdleTimeout(idle)
			if err != nil {
				return err
			}
			if was != idle {
				log.Warn().Stringer("from", was).Stringer("to", idle).Msg("SIGHUP: idle timeout changed")
			}
		}
		if !given("maxmemory") {
			was, err := srv.SetMaxMemory(maxMemory)
			if err != nil {
				return err
			}
			if was != maxMemory {
				log.Warn().Int64("from", was).Int64("to", maxMemory).Msg("SIGHUP: maxmemory changed")
			}
		}
		return nil
	}}
}
