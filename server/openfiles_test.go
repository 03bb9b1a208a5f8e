package server

import (
	"errors"
	"testing"
)

func TestRaiseFileLimit(t *testing.T) {
	errPerm := errors.New("operation not permitted")
	const infinity = ^uint64(0)
	for _, tc := range []struct {
		name    string
		lim     fileLimit
		need    uint64
		hardMax uint64 // the highest hard limit set accepts (an unprivileged process: lim.max)
		want    uint64
		wantErr bool
		sets    []fileLimit
	}{
		{"enough already", fileLimit{1024, 1024}, 100, 1024, 1024, false, nil},
		{"soft raised to what is needed", fileLimit{64, 4096}, 132, 4096, 132, false, []fileLimit{{132, 4096}}},
		{"no hard limit", fileLimit{64, infinity}, 132, infinity, 132, false, []fileLimit{{132, infinity}}},
		{"hard raised when privileged", fileLimit{64, 64}, 132, infinity, 132, false, []fileLimit{{132, 132}}},
		{"hard too low: soft up to hard", fileLimit{64, 100}, 132, 100, 100, true, []fileLimit{{132, 132}, {100, 100}}},
		{"hard too low, soft at hard", fileLimit{64, 64}, 132, 64, 64, true, []fileLimit{{132, 132}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sets []fileLimit
			set := func(l fileLimit) error {
				sets = append(sets, l)
				if l.cur > l.max || l.max > tc.hardMax {
					return errPerm
				}
				return nil
			}
			got, err := raiseFileLimit(tc.lim, tc.need, set)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("raiseFileLimit = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
			if len(sets) != len(tc.sets) {
				t.Fatalf("set called with %v, want %v", sets, tc.sets)
			}
			for i := range sets {
				if sets[i] != tc.sets[i] {
					t.Errorf("set called with %v, want %v", sets, tc.sets)
				}
			}
		})
	}
}
