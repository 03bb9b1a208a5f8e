package protocol

import (
	"math"
	"strings"
	"testing"
)

func TestParseLockStats(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want LockStatsRequest
		err  error
	}{
		{"LOCKSTATS", LockStatsRequest{By: "waits"}, nil},
		{"LOCKSTATS TOP 5", LockStatsRequest{Top: 5, By: "waits"}, nil},
		{"lockstats by HOLD-TIME top 1", LockStatsRequest{Top: 1, By: "hold-time"}, nil},
		{"LOCKSTATS BY acquisitions", LockStatsRequest{By: "acquisitions"}, nil},
		{"LOCKSTATS TOP 100000", LockStatsRequest{Top: 100000, By: "waits"}, nil},
		{"LOCKSTATS TOP 0", LockStatsRequest{}, ErrBadLockStatsTop},
		{"LOCKSTATS TOP 100001", LockStatsRequest{}, ErrBadLockStatsTop},
		{"LOCKSTATS TOP x", LockStatsRequest{}, ErrBadLockStatsTop},
		{"LOCKSTATS BY holders", LockStatsRequest{}, ErrBadLockStatsOrder},
		{"LOCKSTATS TOP", LockStatsRequest{}, ErrSyntax},
		{"LOCKSTATS BY waits BY waits", LockStatsRequest{}, ErrSyntax},
		{"LOCKSTATS LIMIT 3", LockStatsRequest{}, ErrSyntax},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseLockStats(fields(tc.in))
			if err != tc.err || err == nil && got != tc.want {
				t.Fatalf("ParseLockStats(%q) = %+v, %v; want %+v, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseSlowlogCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		err  error
	}{
		{"0", 0, nil},
		{"10", 10, nil},
		{"-1", math.MaxInt32, nil},
		{"99999999999", math.MaxInt32, nil},
		{"-2", 0, ErrBadSlowlogCount},
		{"ten", 0, ErrBadSlowlogCount},
	} {
		got, err := ParseSlowlogCount([]byte(tc.in))
		if err != tc.err || got != tc.want {
			t.Errorf("ParseSlowlogCount(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func fields(s string) [][]byte {
	var args [][]byte
	for _, f := range strings.Fields(s) {
		args = append(args, []byte(f))
	}
	return args
}
