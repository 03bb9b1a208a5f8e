package limits

import (
	"errors"
	"testing"
)

func TestRaiseFileLimit(t *testing.T) {
	errPerm := errors.New("operation not permitted")
	const infinity = ^uint64(0)
	for _, tc := range []struct {
		name    string
		lim     FileLimit
		need    uint64
		hardMax uint64 // the highest hard limit set accepts (an unprivileged process: lim.Max)
		want    uint64
		wantErr bool
		sets    []FileLimit
	}{
		{"enough already", FileLimit{1024, 1024}, 100, 1024, 1024, false, nil},
		{"soft raised to what is needed", FileLimit{64, 4096}, 132, 4096, 132, false, []FileLimit{{132, 4096}}},
		{"no hard limit", FileLimit{64, infinity}, 132, infinity, 132, false, []FileLimit{{132, infinity}}},
		{"hard raised when privileged", FileLimit{64, 64}, 132, infinity, 132, false, []FileLimit{{132, 132}}},
		{"hard too low: soft up to hard", FileLimit{64, 100}, 132, 100, 100, true, []FileLimit{{132, 132}, {100, 100}}},
		{"hard too low, soft at hard", FileLimit{64, 64}, 132, 64, 64, true, []FileLimit{{132, 132}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sets []FileLimit
			set := func(l FileLimit) error {
				sets = append(sets, l)
				if l.Cur > l.Max || l.Max > tc.hardMax {
					return errPerm
				}
				return nil
			}
			got, err := RaiseFileLimit(tc.lim, tc.need, set)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("RaiseFileLimit = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
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
