package keyslot

import "testing"

// The slots are CLUSTER KEYSLOT's, from redis-server 7.0.15 with
// cluster-enabled yes; 0x31C3 is the check value the Redis Cluster
// specification gives for CRC16("123456789").
func TestOf(t *testing.T) {
	if got := crc16([]byte("123456789")); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for _, tc := range []struct {
		key  string
		slot uint16
	}{
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"somekey", 11058},
		{"123456789", 12739},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"{}x", 10595},   // an empty tag is no tag: the whole key
		{"a{}b", 13694},  // likewise
		{"{{a}}", 10276}, // the tag is "{a": from the first { to the first } after it
		{"x{a}{b}", 15495},
		{`\xff\x00ab`, 9717},
		{"", 0},
	} {
		if got := Of([]byte(tc.key)); got != tc.slot {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}

func BenchmarkOf(b *testing.B) {
	key := []byte("jobs:nightly-report:2026-11-24")
	for b.Loop() {
		Of(key)
	}
}
