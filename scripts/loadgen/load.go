package main

import (
	"flag"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/leasehold/leasehold/scripts/internal/hist"
)

// loadResult is the JSON line of the load mode. Deadlines are wall-clock
// Unix milliseconds. The server fixes a lease's deadline as its own now + ttl,
// some time between our write of the batch and our read of the reply, so the
// last deadline is known only within a window: last_deadline_low_ms (write
// time + ttl) to last_deadline_high_ms (reply time + ttl).
type loadResult struct {
	header
	Leases        int64   `json:"leases"`
	Granted       int64   `json:"granted"`
	NotGranted    int64   `json:"not_granted"` // the key was already held
	Late          int64   `json:"late"`        // deadline already past at send time: sent with ttl 1
	LoadPerS      float64 `json:"load_per_s"`
	MaxBatchRTTMs float64 `json:"max_batch_rtt_ms"`
	FirstDeadline int64   `json:"first_deadline_low_ms"`
	LastDeadlineL int64   `json:"last_deadline_low_ms"`
	LastDeadlineH int64   `json:"last_deadline_high_ms"`
}

type loadOpts struct {
	addr     string
	m        int64
	ttlMs    int64
	atMs     int64 // window mode: deadlines spread over [at+t, at+t+w]
	tMs, wMs int64
	conns    int
	pipeline int
	prefix   string
}

func loadMain(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	common := addCommon(fs)
	var o loadOpts
	fs.Int64Var(&o.m, "m", 1_000_000, "leases to take, keys PREFIX0..PREFIX(m-1)")
	fs.Int64Var(&o.ttlMs, "ttl", 600_000, "lease ttl, ms (ignored with -at)")
	fs.Int64Var(&o.atMs, "at", 0, "window mode: wall-clock Unix ms the window is measured from (0: fixed -ttl)")
	fs.Int64Var(&o.tMs, "t", 20_000, "window mode: the first deadline, ms after -at")
	fs.Int64Var(&o.wMs, "w", 1000, "window mode: deadlines spread uniformly over this many ms")
	fs.IntVar(&o.conns, "c", 4, "connections")
	fs.IntVar(&o.pipeline, "P", 512, "commands per pipelined batch")
	fs.StringVar(&o.prefix, "prefix", "lease:", "key prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.m < 1 || o.conns < 1 || o.pipeline < 1 || (o.atMs == 0 && o.ttlMs < 1) || (o.atMs != 0 && (o.tMs < 0 || o.wMs < 0)) {
		return fmt.Errorf("load: -m, -c, -P and -ttl must be positive; -t and -w not negative")
	}
	t, err := common.target()
	if err != nil {
		return err
	}
	o.addr = common.addr
	res, err := runLoad(t, o)
	if err != nil {
		return err
	}
	return emit(res, res.Errors)
}

type loadWorker struct {
	res                         loadResult // per-worker counts, merged after
	maxRTT                      time.Duration
	firstLow, lastLow, lastHigh int64 // Unix ns
	err                         error
}

func runLoad(t *target, o loadOpts) (*loadResult, error) {
	clients := make([]*client, o.conns)
	for i := range clients {
		c, err := dial(o.addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[i] = c
	}
	workers := make([]loadWorker, o.conns)
	cpu0 := rusage()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range workers {
		lo := o.m * int64(i) / int64(o.conns)
		hi := o.m * int64(i+1) / int64(o.conns)
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers[i].load(t, clients[i], &o, lo, hi, uint64(start.UnixNano())+uint64(i))
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := &loadResult{header: newHeader("load", t, o.addr, elapsed, cpu0, rusage()), Leases: o.m}
	var firstLow, lastLow, lastHigh int64
	var maxRTT time.Duration
	for i := range workers {
		w := &workers[i]
		res.Granted += w.res.Granted
		res.NotGranted += w.res.NotGranted
		res.Late += w.res.Late
		res.Errors += w.res.Errors
		if w.err != nil && res.FirstError == "" {
			res.FirstError = w.err.Error()
		}
		if firstLow == 0 || (w.firstLow != 0 && w.firstLow < firstLow) {
			firstLow = w.firstLow
		}
		lastLow = max(lastLow, w.lastLow)
		lastHigh = max(lastHigh, w.lastHigh)
		maxRTT = max(maxRTT, w.maxRTT)
	}
	res.LoadPerS = float64(res.Granted+res.NotGranted) / elapsed.Seconds()
	res.MaxBatchRTTMs = hist.Ms(maxRTT)
	res.FirstDeadline = firstLow / 1e6
	res.LastDeadlineL = lastLow / 1e6
	res.LastDeadlineH = (lastHigh + 999_999) / 1e6
	return res, nil
}

// load takes the leases lo..hi-1 in pipelined batches.
func (w *loadWorker) load(t *target, c *client, o *loadOpts, lo, hi int64, seed uint64) {
	rnd := rng(seed)
	var key, tok []byte
	for i := lo; i < hi; {
		n := min(int64(o.pipeline), hi-i)
		now := time.Now().UnixNano()
		minTTL, maxTTL := int64(1<<62), int64(0)
		for j := i; j < i+n; j++ {
			ttl := o.ttlMs
			if o.atMs != 0 {
				deadline := o.atMs*1e6 + o.tMs*1e6 + o.wMs*1e6*j/o.m
				ttl = (deadline - now + 999_999) / 1e6
				if ttl < 1 {
					ttl = 1
					w.res.Late++
				}
			}
			minTTL, maxTTL = min(minTTL, ttl), max(maxTTL, ttl)
			key = strconv.AppendInt(append(key[:0], o.prefix...), j, 10)
			if t.redis {
				tok = appendToken(tok[:0], &rnd)
			}
			c.out = t.appendAcquire(c.out, key, tok, ttl)
		}
		sent := time.Now()
		if err := c.flush(); err != nil {
			w.fail(err)
			return
		}
		for j := int64(0); j < n; j++ {
			r, err := c.rd.read()
			if err != nil {
				w.fail(err)
				return
			}
			ok, _, err := t.granted(r)
			if err != nil {
				w.fail(err)
				return
			}
			if ok {
				w.res.Granted++
			} else {
				w.res.NotGranted++
			}
		}
		recv := time.Now()
		w.maxRTT = max(w.maxRTT, recv.Sub(sent))
		if w.firstLow == 0 || sent.UnixNano()+minTTL*1e6 < w.firstLow {
			w.firstLow = sent.UnixNano() + minTTL*1e6
		}
		w.lastLow = max(w.lastLow, sent.UnixNano()+maxTTL*1e6)
		w.lastHigh = max(w.lastHigh, recv.UnixNano()+maxTTL*1e6)
		i += n
	}
}

func (w *loadWorker) fail(err error) {
	w.res.Errors++
	w.err = err
}
