package command

import (
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/locker"
	"github.com/rs/zerolog"
)

// bootToken reads the wall clock once (bootClock) and returns the boot-epoch
// token serve's sequence starts from, or why serve must not start from it.
//
// A clock before the token epoch gives every start the same first token, so
// without --data-dir a restart would hand out tokens an earlier run already
// granted: serve refuses, as it refuses --fsync without --data-dir, unless
// the operator opts in. With --data-dir the tokens start above those the
// directory knows of whatever the clock says, so it only warns. A clock past
// the range below 2^53 is refused whatever the flags.
func bootToken(log zerolog.Logger, dataDir string, allowBeforeEpoch bool) (uint64, error) {
	boot, err := bootClock()
	if err != nil {
		return 0, err
	}
	err = locker.CheckBootClock(boot)
	switch {
	case err == nil:
	case errors.Is(err, locker.ErrClockPastTokenRange):
		return 0, fmt.Errorf("%w; set the wall clock right: no flag makes this start safe", err)
	case dataDir != "":
		log.Warn().Err(err).Msg("the wall clock is wrong: tokens still start above every token the data directory knows of, " +
			"and deadlines on disk are restored by the boot clock on the same boot, but after a reboot a clock this wrong may shorten or lengthen them " +
			"(docs/persistence.md, Clock steps between runs)")
	case allowBeforeEpoch:
		log.Warn().Err(err).Msg("starting anyway (--allow-clock-before-epoch): every start with such a clock begins at the same fencing token, " +
			"so this run may hand out tokens an earlier run granted")
	default:
		return 0, fmt.Errorf("%w; without --data-dir every start with such a clock begins at the same fencing token and would hand out tokens "+
			"an earlier run granted: set the clock (NTP) before starting, or keep the token sequence on disk with --data-dir DIR, "+
			"or start anyway with --allow-clock-before-epoch", err)
	}
	return locker.BootEpochToken(boot), nil
}
