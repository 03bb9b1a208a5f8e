package command

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// errDurationForm is why a client duration flag refused its value; the
// flag package puts `invalid value "x" for flag -ttl: ` in front.
var errDurationForm = errors.New("want milliseconds (5000) or a duration with a unit (5s, 1m, 500ms)")

// clientDuration is the value of every duration flag of the client
// commands (--ttl, --wait, --kill-grace): a bare integer is milliseconds,
// the unit of the RESP commands and of scripts/leasehold.sh; anything else
// is a Go duration with its unit. Its String is a Go duration, so that
// cli.Context.Duration reads it as it reads a cli.DurationFlag.
type clientDuration struct {
	d time.Duration
	// bare: given as a bare integer, in milliseconds. checkTTL warns of
	// a small one, likely meant as seconds.
	bare bool
}

func (d *clientDuration) Set(s string) error {
	v, err := parseClientDuration(s)
	if err != nil {
		return err
	}
	*d = clientDuration{d: v, bare: strings.Trim(s, "+-0123456789") == ""}
	return nil
}

func (d *clientDuration) String() string { return d.d.String() }

// parseClientDuration reads "5000" as 5s and "5s", "1m", "500ms" as Go
// durations.
func parseClientDuration(s string) (time.Duration, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if digits != "" && strings.Trim(digits, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return 0, errors.New("out of range")
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errDurationForm
	}
	return d, nil
}

// durationFlag is a client command's duration flag, read with
// c.Duration(name). Its help names the forms it takes.
func durationFlag(name string, def time.Duration, usage string) cli.Flag {
	v := clientDuration{d: def}
	// cli shows the first `word` of the usage as the value's placeholder.
	usage += "; `DURATION` in milliseconds (5000) or with a unit (5s, 1m)"
	return &cli.GenericFlag{Name: name, Value: &v, Usage: usage}
}

// waitValue is --wait's value: a client duration, or forever (no bound:
// until granted or interrupted).
type waitValue struct {
	d       time.Duration
	forever bool
}

func (w *waitValue) Set(s string) error {
	if s == "forever" {
		*w = waitValue{forever: true}
		return nil
	}
	d, err := parseClientDuration(s)
	if err != nil {
		return errors.New("want milliseconds (5000), a duration with a unit (5s, 1m, 500ms) or forever")
	}
	*w = waitValue{d: d}
	return nil
}

func (w *waitValue) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

// waitFlag is run's and acquire's --wait.
func waitFlag() cli.Flag {
	return &cli.GenericFlag{Name: "wait", Value: &waitValue{}, Usage: "wait up to this long for the lock, in the server's fair queue (0: try once, as flock -n; forever, or --wait alone: until granted or interrupted); `DURATION` in milliseconds (5000), with a unit (5s, 1m) or forever"}
}
