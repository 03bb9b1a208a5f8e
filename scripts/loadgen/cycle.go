package main

import (
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/scripts/internal/hist"
)

// cycleResult is the JSON line of the cycle mode.
type cycleResult struct {
	header
	Conns         int          `json:"conns"`
	Pipeline      int          `json:"pipeline"`
	Keys          int          `json:"keys"`
	TTLMs         int64        `json:"ttl_ms"`
	Cycles        uint64       `json:"cycles"`         // acquire attempts, each with its release if granted
	Grants        uint64       `json:"grants"`         // acquires granted
	Releases      uint64       `json:"releases"`       // releases answered 1
	ReleaseMisses uint64       `json:"release_misses"` // releases answered 0 (lease gone: ttl too short)
	Requests      uint64       `json:"requests"`       // acquires + releases sent
	CyclesPerS    float64      `json:"cycles_per_s"`
	GrantsPerS    float64      `json:"grants_per_s"`
	RequestsPerS  float64      `json:"requests_per_s"`
	Latency       hist.Latency `json:"latency"` // per request, acquires and releases alike
}

type cycleOpts struct {
	addr     string
	conns    int
	pipeline int
	keys     int
	ttlMs    int64
	n        int64
	dur      time.Duration
	prefix   string
}

func cycleMain(args []string) error {
	fs := flag.NewFlagSet("cycle", flag.ContinueOnError)
	common := addCommon(fs)
	var o cycleOpts
	fs.IntVar(&o.conns, "c", 50, "connections")
	fs.IntVar(&o.pipeline, "P", 1, "pipeline depth: acquires sent before reading their replies")
	fs.IntVar(&o.keys, "keys", 1_000_000, "key space: large is uncontended, small is contention")
	fs.Int64Var(&o.ttlMs, "ttl", 30000, "lease ttl, ms")
	fs.Int64Var(&o.n, "n", 0, "stop after this many cycles in all (0: only -d bounds the run)")
	fs.DurationVar(&o.dur, "d", 10*time.Second, "stop after this long")
	fs.StringVar(&o.prefix, "prefix", "cycle:", "key prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.conns < 1 || o.pipeline < 1 || o.keys < 1 || o.ttlMs < 1 || o.dur <= 0 || o.n < 0 {
		return fmt.Errorf("cycle: -c, -P, -keys, -ttl and -d must be positive, -n not negative")
	}
	t, err := common.target()
	if err != nil {
		return err
	}
	o.addr = common.addr
	res, err := runCycle(t, o)
	if err != nil {
		return err
	}
	return emit(res, res.Errors)
}

// cycleWorker is one connection's loop state; nothing in it is shared.
type cycleWorker struct {
	c      *client
	t      *target
	o      *cycleOpts
	rnd    rng
	keys   [][]byte // one key buffer per pipeline slot
	toks   [][]byte // the Redis token of each slot
	tokens []int64  // the leasehold token of each slot
	won    []bool
	hist   hist.Histogram

	cycles, grants, releases, misses, requests, errors uint64
	firstErr                                           error
}

func runCycle(t *target, o cycleOpts) (*cycleResult, error) {
	if err := t.prepare(o.addr); err != nil {
		return nil, err
	}
	workers := make([]*cycleWorker, o.conns)
	for i := range workers {
		c, err := dial(o.addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		w := &cycleWorker{c: c, t: t, o: &o, rnd: rng(uint64(time.Now().UnixNano()) + uint64(i)*0x9e3779b97f4a7c15)}
		for range o.pipeline {
			w.keys = append(w.keys, make([]byte, 0, len(o.prefix)+20))
			w.toks = append(w.toks, make([]byte, 0, 16))
		}
		w.tokens = make([]int64, o.pipeline)
		w.won = make([]bool, o.pipeline)
		workers[i] = w
	}

	var claimed atomic.Int64
	cpu0 := rusage()
	start := time.Now()
	end := start.Add(o.dur)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(&claimed, end)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := rusage()

	res := &cycleResult{
		header:   newHeader("cycle", t, o.addr, elapsed, cpu0, cpu1),
		Conns:    o.conns,
		Pipeline: o.pipeline,
		Keys:     o.keys,
		TTLMs:    o.ttlMs,
	}
	var h hist.Histogram
	for _, w := range workers {
		h.Merge(&w.hist)
		res.Cycles += w.cycles
		res.Grants += w.grants
		res.Releases += w.releases
		res.ReleaseMisses += w.misses
		res.Requests += w.requests
		res.Errors += w.errors
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
	}
	secs := elapsed.Seconds()
	res.CyclesPerS = float64(res.Cycles) / secs
	res.GrantsPerS = float64(res.Grants) / secs
	res.RequestsPerS = float64(res.Requests) / secs
	res.Latency = h.Summary()
	return res, nil
}

// loop runs batches until the shared count or the deadline is reached, or
// the connection fails.
func (w *cycleWorker) loop(claimed *atomic.Int64, end time.Time) {
	p := int64(w.o.pipeline)
	for {
		batch := p
		if w.o.n > 0 {
			got := claimed.Add(p)
			if got-p >= w.o.n {
				return
			}
			batch = min(p, w.o.n-(got-p))
		}
		if err := w.batch(int(batch)); err != nil {
			w.errors++
			if w.firstErr == nil {
				w.firstErr = err
			}
			return // the stream may be out of step: stop this connection
		}
		if !time.Now().Before(end) {
			return
		}
	}
}

// batch sends k acquires, reads their replies, then sends a release for each
// granted one and reads those replies. A request's latency runs from the
// write of its batch to the read of its reply, as redis-benchmark counts it.
func (w *cycleWorker) batch(k int) error {
	c, t := w.c, w.t
	for i := 0; i < k; i++ {
		key := strconv.AppendUint(append(w.keys[i][:0], w.o.prefix...), w.rnd.next()%uint64(w.o.keys), 10)
		w.keys[i] = key
		if t.redis {
			w.toks[i] = appendToken(w.toks[i][:0], &w.rnd)
		}
		c.out = t.appendAcquire(c.out, key, w.toks[i], w.o.ttlMs)
	}
	sent := time.Now()
	if err := c.flush(); err != nil {
		return err
	}
	won := 0
	for i := 0; i < k; i++ {
		r, err := c.rd.read()
		if err != nil {
			return err
		}
		w.hist.Record(time.Since(sent))
		ok, token, err := t.granted(r)
		if err != nil {
			return err
		}
		w.won[i], w.tokens[i] = ok, token
		if ok {
			won++
		}
	}
	w.cycles += uint64(k)
	w.requests += uint64(k)
	w.grants += uint64(won)
	if won == 0 {
		return nil
	}
	for i := 0; i < k; i++ {
		if w.won[i] {
			c.out = t.appendRelease(c.out, w.keys[i], w.toks[i], w.tokens[i])
		}
	}
	sent = time.Now()
	if err := c.flush(); err != nil {
		return err
	}
	for i := 0; i < won; i++ {
		r, err := c.rd.read()
		if err != nil {
			return err
		}
		w.hist.Record(time.Since(sent))
		ok, err := t.released(r)
		if err != nil {
			return err
		}
		if ok {
			w.releases++
		} else {
			w.misses++
		}
	}
	w.requests += uint64(won)
	return nil
}
