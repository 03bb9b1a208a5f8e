// Package keyslot maps a lock's name to one of Redis Cluster's 16384 hash
// slots, as CLUSTER KEYSLOT does: CRC16 (XMODEM) of the key, or of the part
// inside its first non-empty {hash tag}, modulo 16384. It is deterministic
// across processes and machines (no seed, no CPU count), which is what a
// replicated lock table needs to number its grants, and what Redis Cluster
// clients use to route keys.
package keyslot

// Slots is the number of hash slots, as in Redis Cluster.
const Slots = 16384

// Of returns key's slot, as Redis's keyHashSlot.
func Of(key []byte) uint16 {
	if open := indexByte(key, '{'); open >= 0 {
		if end := indexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return crc16(key) & (Slots - 1)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis's crc16.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, x := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^x]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
