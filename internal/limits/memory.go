package limits

import (
	"errors"
	"fmt"
	"math"
	"runtime/metrics"
	"strconv"
	"strings"
)

// errMemoryForm is why ParseMemory refused a size.
var errMemoryForm = errors.New("want bytes (536870912) or a number with a unit: b, k, kb, m, mb, g, gb (512mb)")

// ParseMemory reads a size as Redis reads one in its configuration
// (memtoull): a number of bytes, bare or with a unit, k, m and g powers of
// 1000, kb, mb and gb of 1024, in any case. --maxmemory and
// --client-output-buffer-limit take sizes in this form.
func ParseMemory(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    int64
	}{
		// Longest first, so that "kb" is not read as "k" and a "b".
		{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30},
		{"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1},
	}
	num, mul := strings.ToLower(s), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mul = rest, u.mul
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(num, "+") {
		return 0, errMemoryForm
	}
	if n > math.MaxInt64/mul {
		return 0, fmt.Errorf("%q is more than %d bytes", s, int64(math.MaxInt64))
	}
	return n * mul, nil
}

// heapObjects names the Go heap in use in runtime/metrics: the bytes of
// objects allocated and not yet freed, runtime.MemStats.HeapAlloc without
// stopping the world.
const heapObjects = "/memory/classes/heap/objects:bytes"

// HeapInUse reads the Go heap in use, the reading --maxmemory is checked
// against.
func HeapInUse() uint64 {
	s := [1]metrics.Sample{{Name: heapObjects}}
	metrics.Read(s[:])
	return s[0].Value.Uint64()
}
