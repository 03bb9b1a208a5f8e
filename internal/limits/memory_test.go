package limits

import "testing"

// TestParseMemory reads sizes as Redis reads maxmemory: k, m and g
// are powers of 1000, kb, mb and gb of 1024, in any case.
func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1", 1}, {"100b", 100}, {"1k", 1000}, {"1kb", 1024}, {"1KB", 1024},
		{"512mb", 512 << 20}, {"512m", 512_000_000}, {"2gb", 2 << 30}, {"2G", 2_000_000_000},
		{"8589934592", 8 << 30},
	} {
		if got, err := ParseMemory(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "mb", "-1", "+5", "1.5gb", "5tb", "1 mb", "9999999999gb", "1bb"} {
		if got, err := ParseMemory(bad); err == nil {
			t.Errorf("ParseMemory(%q) = %d; want an error", bad, got)
		}
	}
}
