package command

import (
	"testing"
)

// TestLockStatsFlag: lock statistics are on by default, and --lockstats-top 0
// (or its variable) turns them off; CONFIG GET reports the setting.
func TestLockStatsFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		top     string
		wantErr string
	}{
		{"default", nil, nil, "100", ""},
		{"flag 0", nil, []string{"--lockstats-top", "0"}, "0", "ERR lock statistics are off (--lockstats-top 0)"},
		{"variable 0", []string{"LEASEHOLD_LOCKSTATS_TOP=0"}, nil, "0", "ERR lock statistics are off (--lockstats-top 0)"},
		{"flag 5", nil, []string{"--lockstats-top", "5"}, "5", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, addr := serveBinary(t, func(addr string) ([]string, []string) {
				_, args := serveArgs(tc.args...)(addr)
				return tc.env, args
			})
			rdb := client(t, addr)
			c := testCtx(t)
			if got, err := rdb.ConfigGet(c, "lockstats-top").Result(); err != nil || got["lockstats-top"] != tc.top {
				t.Errorf("CONFIG GET lockstats-top = %v, %v; want %s", got, err, tc.top)
			}
			if err := rdb.Do(c, "ACQUIRE", "k", "1000").Err(); err != nil {
				t.Fatal(err)
			}
			res, err := rdb.Do(c, "LOCKSTATS").Slice()
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("LOCKSTATS = %v, %v; want %q", res, err, tc.wantErr)
				}
			case err != nil || len(res) != 1:
				t.Errorf("LOCKSTATS = %v, %v; want the one lock", res, err)
			}
		})
	}
}
