package command

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/limits"
	"github.com/leasehold/leasehold/locker"
	"github.com/leasehold/leasehold/persist"
	"github.com/leasehold/leasehold/protocol"
	"github.com/leasehold/leasehold/server"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// serveFlags reads every default from the packages' DefaultConfig, so the
// help text cannot drift from what the server does.
func serveFlags() []cli.Flag {
	def := server.DefaultConfig()
	return append([]cli.Flag{
		&cli.StringFlag{Name: "addr", Value: def.Addr, EnvVars: env("ADDR"), Usage: "TCP address to listen on, HOST:PORT; \"\" for none, with a TLS listener"},
		&cli.IntFlag{Name: "shards", Value: def.Locker.Shards, EnvVars: env("SHARDS"), Usage: "lock table shards, a power of two; the default is 16 per CPU"},
		&cli.DurationFlag{Name: "max-ttl", Value: def.Locker.MaxTTL, EnvVars: env("MAX_TTL"), Usage: "longest lease or default ttl a client may ask for"},
		&cli.IntFlag{Name: "max-key-len", Value: def.Locker.MaxKeyLen, EnvVars: env("MAX_KEY_LEN"), Usage: fmt.Sprintf("longest lock name or owner id in bytes (at most %d)", locker.MaxKeyLenLimit)},
		&cli.IntFlag{Name: "max-locks", Value: def.Locker.MaxLocks, EnvVars: env("MAX_LOCKS"), Usage: "most locks in the table, made by ACQUIRE or CREATE; past it a new lock gets -OOM while existing locks work on (0: no bound)"},
		&cli.StringFlag{Name: "maxmemory", Value: strconv.FormatInt(def.MaxMemory, 10), EnvVars: env("MAXMEMORY"), Usage: "most Go heap in use, in bytes or with Redis's units (512mb, 2gb; 1k is 1000, 1kb 1024); past it ACQUIRE, MACQUIRE and CREATE get -OOM while VERIFY, RELEASE, EXTEND, DELETE and reads work on (0: no bound)"},
		&cli.DurationFlag{Name: "lock-delay", Value: def.Locker.LockDelay, EnvVars: env("LOCK_DELAY"), Usage: "after a lease expires (not when released), keep the lock ungrantable this long; CREATE ... LOCKDELAY overrides"},
		&cli.BoolFlag{Name: "require-create", EnvVars: env("REQUIRE_CREATE"), Usage: "ACQUIRE of an unknown lock fails instead of creating it"},
		&cli.DurationFlag{Name: "tick", Value: def.Locker.Tick, EnvVars: env("TICK"), Usage: "expiry timer wheel resolution"},
		&cli.IntFlag{Name: "io-loops", Value: def.IOLoops, EnvVars: env("IO_LOOPS"), Usage: "epoll event loops serving connections (Linux); 0 runs a goroutine per connection"},
		&cli.IntFlag{Name: "max-clients", Value: def.MaxClients, EnvVars: env("MAX_CLIENTS"), Usage: "most open connections"},
		&cli.DurationFlag{Name: "idle-timeout", Value: def.IdleTimeout, EnvVars: env("IDLE_TIMEOUT"), Usage: "close connections silent this long (0: never)"},
		&cli.Int64Flag{Name: "max-bulk-len", Value: def.Limits.MaxBulkLen, EnvVars: env("MAX_BULK_LEN"), Usage: "longest RESP bulk string in bytes"},
		&cli.Int64Flag{Name: "max-query-buffer", Value: def.Limits.MaxQueryBuffer, EnvVars: env("MAX_QUERY_BUFFER"), Usage: "most bytes one pending command may occupy, and most input read ahead while replies wait for a client"},
		&cli.StringFlag{Name: "client-output-buffer-limit", Value: def.OutputLimits.String(), EnvVars: env("CLIENT_OUTPUT_BUFFER_LIMIT"), Usage: "as Redis's: '<class> <hard> <soft> <soft-seconds>' for class normal and/or pubsub, sizes in bytes or with kb, mb, gb; a client whose unread output passes hard, or stays above soft that long, is disconnected (0: no bound)"},
		&cli.StringFlag{Name: "data-dir", EnvVars: env("DATA_DIR"), Usage: "keep locks, leases and the token sequence in this directory, across restarts and crashes (default: none, nothing touches disk)"},
		&cli.StringFlag{Name: "fsync", Value: def.Persist.Fsync.String(), EnvVars: env("FSYNC"), Usage: "with --data-dir: always (a grant is on disk before its reply; concurrent grants share an fsync), everysec or no, as Redis's appendfsync"},
		&cli.DurationFlag{Name: "restart-grace", EnvVars: env("RESTART_GRACE"), Usage: "with --data-dir: every lease still live at start runs at least this long after the start, so holders can renew; in cluster mode, at the start of each leader's term"},
		&cli.BoolFlag{Name: "repair", EnvVars: env("REPAIR"), Usage: "with --data-dir: start on a damaged data directory by dropping everything from the damage on (logged), instead of refusing to start"},
		&cli.BoolFlag{Name: "allow-clock-before-epoch", EnvVars: env("ALLOW_CLOCK_BEFORE_EPOCH"), Usage: "without --data-dir, start even when the wall clock reads before 2026-01-01; fencing tokens may then repeat those of an earlier run"},
		&cli.DurationFlag{Name: "shutdown-timeout", Value: def.ShutdownTimeout, EnvVars: env("SHUTDOWN_TIMEOUT"), Usage: "on SIGTERM or SIGINT, give clients this long to take their replies before closing their connections regardless; then sync the data directory and exit"},
		&cli.StringFlag{Name: "requirepass-file", EnvVars: env("REQUIREPASS_FILE"), Usage: "require clients to AUTH with the password in this file (its first line) as the default user, as Redis's requirepass (see docs/security.md)"},
		&cli.StringFlag{Name: "requirepass", EnvVars: env("REQUIREPASS"), Usage: "the password itself; prefer the environment variable or --requirepass-file: a command line is visible to every user of the machine (ps)"},
		&cli.StringFlag{Name: "acl-file", EnvVars: env("ACL_FILE"), Usage: "users and their permissions, one 'user <name> <rules...>' a line in Redis's ACL file syntax; reloaded by ACL LOAD and SIGHUP (see docs/security.md)"},
		&cli.StringFlag{Name: "protected-mode", Value: protocol.YesNo(def.ProtectedMode), EnvVars: env("PROTECTED_MODE"), Usage: "yes or no; yes, without a password, refuses clients that are not on loopback, as Redis's protected mode"},
		&cli.Int64Flag{Name: "slowlog-log-slower-than", Value: def.SlowlogSlowerThan, EnvVars: env("SLOWLOG_LOG_SLOWER_THAN"), Usage: "SLOWLOG logs commands that run at least this many microseconds, as Redis's (negative: none, 0: every command)"},
		&cli.IntFlag{Name: "slowlog-max-len", Value: def.SlowlogMaxLen, EnvVars: env("SLOWLOG_MAX_LEN"), Usage: "how many SLOWLOG entries are kept, the newest"},
		&cli.IntFlag{Name: "lockstats-top", Value: def.LockStatsTop, EnvVars: env("LOCKSTATS_TOP"), Usage: "LOCKSTATS reports at most this many of the hottest locks, tracked in bounded memory (about 1.6 MB at 100); 0: no lock statistics, and no cost for them"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: env("LOG_LEVEL"), Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", EnvVars: env("LOG_FORMAT"), Usage: "json or console (default: console when stderr is a terminal)"},
	}, append(append(append(tlsFlags(), clusterFlags()...), adminFlags()...), configFlag())...)
}

// needDataDir are serve's flags that mean nothing without --data-dir.
var needDataDir = []string{"fsync", "restart-grace", "repair"}

// serve runs the server until ctx is cancelled. Once its logger is made,
// every failure is logged through it, as --log-format says, and the error
// returned carries only the exit status.
func serve(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("unexpected argument %q", c.Args().First())
	}
	if err := applyConfigFile(c); err != nil {
		return usageError("%v", err)
	}
	str := func(name string) string { return flag(c, name).String(name) }
	num := func(name string) int { return flag(c, name).Int(name) }
	dur := func(name string) time.Duration { return flag(c, name).Duration(name) }
	num64 := func(name string) int64 { return flag(c, name).Int64(name) }

	log, level, err := newReloadableLogger(os.Stderr, str("log-level"), str("log-format"))
	if err != nil {
		return usageError("%v", err)
	}
	cannotStart := func(err error) error {
		log.Error().Err(err).Msg("cannot start")
		return exitWith(1, nil)
	}
	if err := checkDataDirFlags(c, str("data-dir")); err != nil {
		log.Error().Err(err).Msg("cannot start")
		return exitWith(exitFailure, nil) // a command-line mistake, as in usage errors
	}
	adminCfg, err := adminConfig(c)
	if err != nil {
		log.Error().Err(err).Msg("cannot start")
		return exitWith(exitFailure, nil)
	}
	cfg := server.DefaultConfig()
	cfg.Version = version
	cfg.Addr = str("addr")
	cfg.MaxClients = num("max-clients")
	cfg.IOLoops = num("io-loops")
	cfg.IdleTimeout = dur("idle-timeout")
	cfg.SlowlogSlowerThan = num64("slowlog-log-slower-than")
	cfg.SlowlogMaxLen = num("slowlog-max-len")
	cfg.LockStatsTop = num("lockstats-top")
	cfg.ShutdownTimeout = dur("shutdown-timeout")
	cfg.Limits.MaxBulkLen = num64("max-bulk-len")
	cfg.Limits.MaxQueryBuffer = num64("max-query-buffer")
	if cfg.OutputLimits, err = limits.ParseOutputLimits(str("client-output-buffer-limit"), cfg.OutputLimits); err != nil {
		return cannotStart(err)
	}
	cfg.Locker.Shards = num("shards")
	cfg.Locker.MaxTTL = dur("max-ttl")
	cfg.Locker.MaxKeyLen = num("max-key-len")
	cfg.Locker.RequireCreate = flag(c, "require-create").Bool("require-create")
	cfg.Locker.LockDelay = dur("lock-delay")
	cfg.Locker.MaxLocks = num("max-locks")
	if cfg.MaxMemory, err = limits.ParseMemory(str("maxmemory")); err != nil {
		return usageError("invalid value %q for flag -maxmemory: %v", str("maxmemory"), err)
	}
	cfg.Locker.Tick = dur("tick")
	cfg.Locker.FirstToken, err = bootToken(log, str("data-dir"), flag(c, "allow-clock-before-epoch").Bool("allow-clock-before-epoch"))
	if err != nil {
		return cannotStart(err)
	}
	cfg.Persist.Dir = str("data-dir")
	if cfg.Cluster, err = clusterConfig(c, cfg.Persist.Dir); err != nil {
		log.Error().Err(err).Msg("cannot start")
		return exitWith(exitFailure, nil)
	}
	if cfg.Cluster != nil {
		cfg.Persist.Dir = "" // the Raft log is the data directory's content
		cfg.Redirect = flag(c, "redirect").Bool("redirect")
		cfg.AnnounceAddr = str("announce-addr")
		if cfg.ClusterTLS, err = clusterTLSConfig(c); err != nil {
			log.Error().Err(err).Msg("cannot start")
			return exitWith(exitFailure, nil)
		}
	}
	if cfg.Persist.Fsync, err = persist.ParsePolicy(str("fsync")); err != nil {
		return cannotStart(err)
	}
	cfg.Persist.RestartGrace = dur("restart-grace")
	cfg.Persist.Repair = flag(c, "repair").Bool("repair")
	if cfg.RequirePass, err = requirePass(c, log); err != nil {
		return cannotStart(err)
	}
	cfg.ACLFile = str("acl-file")
	switch v := str("protected-mode"); v {
	case "yes", "no":
		cfg.ProtectedMode = v == "yes"
	default:
		return usageError("invalid value %q for flag -protected-mode: want yes or no", v)
	}
	if cfg.TLS, err = tlsConfig(c, cfg.Addr); err != nil {
		return cannotStart(err)
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		return cannotStart(err)
	}
	stopAdmin, err := startAdmin(adminCfg, srv, log)
	if err != nil {
		srv.Close()
		return cannotStart(err)
	}
	defer stopAdmin()
	reloads := hangupReloads(srv, cfg)
	if file := str("config"); file != "" {
		given := func(name string) bool { return !fromConfigFile(c, name) && setByFlagOrEnv(c, name) }
		reloads = append(reloads, reloadConfigFile(file, given, level, srv, log))
	}
	stopReloads := reloadOnHangup(log, reloads)
	defer stopReloads()
	stopNotify := notifySystemd(c.Context, log, srv)
	defer stopNotify()
	if err := srv.ListenAndServe(c.Context); err != nil {
		if srv.Addr() == nil && srv.TLSAddr() == nil { // Listen failed: the address is taken, say
			srv.Close() // the data directory, opened by New
			return cannotStart(err)
		}
		log.Error().Err(err).Msg("stopped on an error")
		return exitWith(1, nil)
	}
	log.Info().Msg("shut down")
	return nil
}

// checkDataDirFlags refuses --fsync, --restart-grace and --repair without
// --data-dir: whoever gives them expects locks to outlive a restart, and an
// in-memory server would forget them silently (docs/cli.md).
func checkDataDirFlags(c *cli.Context, dataDir string) error {
	if dataDir != "" {
		return nil
	}
	var given []string
	for _, name := range needDataDir {
		if flag(c, name).IsSet(name) {
			given = append(given, "--"+name)
		}
	}
	if len(given) == 0 {
		return nil
	}
	verb, them := "needs", given[0]
	if len(given) > 1 {
		verb, them = "need", "them"
	}
	return fmt.Errorf("%s %s --data-dir: without it nothing is kept on disk and a restart forgets every lock; add --data-dir DIR, or remove %s (flag, LEASEHOLD_ variable or --config file)",
		strings.Join(given, " and "), verb, them)
}

func newLogger(w *os.File, level, format string) (zerolog.Logger, error) {
	log, _, err := newReloadableLogger(w, level, format)
	return log, err
}

// newReloadableLogger is newLogger whose level can change while it runs
// (SIGHUP with --config): the logger lets debug lines through and lv
// drops those below the level in force.
func newReloadableLogger(w *os.File, level, format string) (zerolog.Logger, *logLevel, error) {
	lvl, err := parseLogLevel(level)
	if err != nil {
		return zerolog.Logger{}, nil, err
	}
	fi, err := w.Stat()
	terminal := err == nil && fi.Mode()&os.ModeCharDevice != 0
	var out io.Writer = w
	switch format {
	case "":
		if terminal {
			out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
		}
	case "console":
		// Colours only for a terminal: escape codes in a log file or a
		// journal are noise.
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !terminal}
	case "json":
	default:
		return zerolog.Logger{}, nil, fmt.Errorf("log format %q: want json or console", format)
	}
	lv := &logLevel{w: out}
	lv.set(lvl)
	return zerolog.New(lv).Level(zerolog.DebugLevel).With().Timestamp().Logger(), lv, nil
}

// requirePass returns the default user's password from --requirepass-file,
// LEASEHOLD_REQUIREPASS or --requirepass, and warns when it came from the
// command line, which every user of the machine can read. An empty file is
// an error, not "no password": whoever named it meant to set one.
func requirePass(c *cli.Context, log zerolog.Logger) (string, error) {
	file := flag(c, "requirepass-file").String("requirepass-file")
	pass := flag(c, "requirepass").String("requirepass")
	if file != "" && pass != "" {
		return "", errors.New("give the password one way: --requirepass-file or --requirepass (LEASEHOLD_REQUIREPASS), not both")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--requirepass-file: %w", err)
		}
		pass, _, _ = strings.Cut(string(b), "\n")
		pass = strings.TrimSuffix(pass, "\r")
		if pass == "" {
			return "", fmt.Errorf("--requirepass-file %s: the first line is empty", file)
		}
		return pass, nil
	}
	if pass != "" && pass != os.Getenv("LEASEHOLD_REQUIREPASS") && !fromConfigFile(c, "requirepass") {
		log.Warn().Msg("--requirepass on the command line is visible to every user of this machine (ps, /proc); use --requirepass-file or LEASEHOLD_REQUIREPASS instead")
	}
	return pass, nil
}
