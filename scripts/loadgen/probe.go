package main

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/scripts/internal/hist"
)

// probeResult is the JSON line of the probe mode: the latency one quiet client
// sees while something else happens on the server.
type probeResult struct {
	header
	Cmd        string       `json:"cmd"`
	IntervalMs float64      `json:"interval_ms"`
	StartMs    int64        `json:"start_ms"` // when probing began, Unix ms
	Ops        uint64       `json:"ops"`      // requests timed
	Missed     uint64       `json:"missed"`   // ticks skipped because a request overran its slot
	Latency    hist.Latency `json:"latency"`
}

func probeMain(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	common := addCommon(fs)
	cmd := fs.String("cmd", "acquire", "acquire (ACQUIRE then RELEASE, each timed) or ping")
	interval := fs.Duration("interval", time.Millisecond, "one operation per interval")
	dur := fs.Duration("d", 2*time.Second, "probe for this long")
	startMs := fs.Int64("start", 0, "wait until this wall-clock Unix ms before probing (0: now)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cmd != "acquire" && *cmd != "ping" {
		return fmt.Errorf("probe: -cmd must be acquire or ping, got %q", *cmd)
	}
	if *interval <= 0 || *dur <= 0 {
		return fmt.Errorf("probe: -interval and -d must be positive")
	}
	t, err := common.target()
	if err != nil {
		return err
	}
	if err := t.prepare(common.addr); err != nil {
		return err
	}
	c, err := dial(common.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()

	sleepUntil(*startMs)
	res := &probeResult{Cmd: *cmd, IntervalMs: hist.Ms(*interval)}
	var h hist.Histogram
	rnd := rng(time.Now().UnixNano())
	var key, tok []byte
	cpu0 := rusage()
	start := time.Now()
	end := start.Add(*dur)
	next := start
	var runErr error
	for i := uint64(0); time.Now().Before(end); i++ {
		if runErr = probeOnce(c, t, *cmd, &h, &key, &tok, &rnd, i); runErr != nil {
			break
		}
		next = next.Add(*interval)
		if now := time.Now(); now.After(next) {
			// Overran: skip the lost slots rather than burst to catch up.
			res.Missed += uint64(now.Sub(next) / *interval)
			next = now
		} else {
			time.Sleep(next.Sub(now))
		}
	}
	res.header = newHeader("probe", t, common.addr, time.Since(start), cpu0, rusage())
	res.StartMs = start.UnixMilli()
	res.Latency = h.Summary()
	res.Ops = res.Latency.Count
	if runErr != nil {
		res.Errors = 1
		res.FirstError = runErr.Error()
	}
	return emit(res, res.Errors)
}

// probeOnce times one PING, or one ACQUIRE and, if granted, its RELEASE, on
// one of 64 probe keys.
func probeOnce(c *client, t *target, cmd string, h *hist.Histogram, key, tok *[]byte, rnd *rng, i uint64) error {
	if cmd == "ping" {
		c.out = appendCommand(c.out, "PING")
		sent := time.Now()
		if err := c.flush(); err != nil {
			return err
		}
		r, err := c.rd.read()
		h.Record(time.Since(sent))
		if err != nil {
			return err
		}
		if r.kind != '+' {
			return fmt.Errorf("PING answered %v", r)
		}
		return nil
	}
	*key = strconv.AppendUint(append((*key)[:0], "probe:"...), i%64, 10)
	if t.redis {
		*tok = appendToken((*tok)[:0], rnd)
	}
	c.out = t.appendAcquire(c.out, *key, *tok, 5000)
	sent := time.Now()
	if err := c.flush(); err != nil {
		return err
	}
	r, err := c.rd.read()
	h.Record(time.Since(sent))
	if err != nil {
		return err
	}
	ok, token, err := t.granted(r)
	if err != nil || !ok {
		return err
	}
	c.out = t.appendRelease(c.out, *key, *tok, token)
	sent = time.Now()
	if err := c.flush(); err != nil {
		return err
	}
	r, err = c.rd.read()
	h.Record(time.Since(sent))
	if err != nil {
		return err
	}
	_, err = t.released(r)
	return err
}

// watchResult is the JSON line of the watch mode: when the live leases
// (leasehold: INFO locks leases_held; Redis: INFO keyspace keys) reached 0.
// Times are wall-clock Unix ms; the poll interval is the resolution.
type watchResult struct {
	header
	StartMs       int64   `json:"start_ms"`
	HeldAtStart   int64   `json:"held_at_start"`
	FirstDropMs   int64   `json:"first_drop_ms"`   // first poll seeing fewer than at start
	LastNonzeroMs int64   `json:"last_nonzero_ms"` // last poll still seeing some
	ZeroAtMs      int64   `json:"zero_at_ms"`      // first poll seeing none; 0 if never
	Polls         int     `json:"polls"`
	MaxPollMs     float64 `json:"max_poll_ms"` // slowest INFO round trip
	TickMs        int64   `json:"wheel_tick_ms,omitempty"`
	TimedOut      bool    `json:"timed_out"`
}

func watchMain(args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	common := addCommon(fs)
	startMs := fs.Int64("start", 0, "wait until this wall-clock Unix ms before polling (0: now)")
	interval := fs.Duration("interval", 10*time.Millisecond, "poll period")
	timeout := fs.Duration("timeout", 30*time.Second, "give up this long after the start")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *interval <= 0 || *timeout <= 0 {
		return fmt.Errorf("watch: -interval and -timeout must be positive")
	}
	t, err := common.target()
	if err != nil {
		return err
	}
	c, err := dial(common.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	res := &watchResult{HeldAtStart: -1}
	if !t.redis {
		r, err := c.do("INFO", "locks")
		if err != nil {
			return err
		}
		res.TickMs, _ = infoField(r.str, "wheel_tick_ms:")
	}
	sleepUntil(*startMs)
	cpu0 := rusage()
	start := time.Now()
	end := start.Add(*timeout)
	var maxPoll time.Duration
	var pollErr error
	for {
		sent := time.Now()
		held, err := liveCount(c, t)
		if err != nil {
			pollErr = err
			break
		}
		now := time.Now()
		maxPoll = max(maxPoll, now.Sub(sent))
		res.Polls++
		at := now.UnixMilli()
		if res.HeldAtStart < 0 {
			res.HeldAtStart = held
		}
		if held < res.HeldAtStart && res.FirstDropMs == 0 {
			res.FirstDropMs = at
		}
		if held == 0 {
			res.ZeroAtMs = at
			break
		}
		res.LastNonzeroMs = at
		if now.After(end) {
			res.TimedOut = true
			break
		}
		time.Sleep(time.Until(sent.Add(*interval)))
	}
	res.header = newHeader("watch", t, common.addr, time.Since(start), cpu0, rusage())
	if pollErr != nil {
		res.Errors, res.FirstError = 1, pollErr.Error()
	}
	res.StartMs = start.UnixMilli()
	res.MaxPollMs = hist.Ms(maxPoll)
	return emit(res, res.Errors)
}

// liveCount asks the server how many leases (keys) are live.
func liveCount(c *client, t *target) (int64, error) {
	section, field := "locks", "leases_held:"
	if t.redis {
		section, field = "keyspace", "db0:keys="
	}
	r, err := c.do("INFO", section)
	if err != nil {
		return 0, err
	}
	if r.kind != '$' || r.null {
		return 0, fmt.Errorf("INFO %s answered %v", section, r)
	}
	v, ok := infoField(r.str, field)
	if !ok {
		if t.redis {
			return 0, nil // Redis omits an empty database
		}
		return 0, fmt.Errorf("INFO %s has no %s", section, field)
	}
	return v, nil
}

// infoField finds "name<digits>" at a line start in an INFO reply.
func infoField(info []byte, name string) (int64, bool) {
	for len(info) > 0 {
		line := info
		if i := bytes.IndexByte(info, '\n'); i >= 0 {
			line, info = info[:i], info[i+1:]
		} else {
			info = nil
		}
		line = bytes.TrimRight(line, "\r")
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		v := line[len(name):]
		end := 0
		for end < len(v) && v[end] >= '0' && v[end] <= '9' {
			end++
		}
		return parseInt(v[:end])
	}
	return 0, false
}
