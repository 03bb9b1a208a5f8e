package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/scripts/internal/hist"
)

// leasehold talks RESP to leasehold nodes.
type leasehold struct {
	// redisProto: the cycle of a Redis lock library (SET key token NX PX
	// ttl, then the compare-and-delete release by EVALSHA), which
	// leasehold runs as ACQUIRE and a release by owner.
	redisProto bool
}

// clusterInfo returns the CLUSTER INFO fields of the node at addr.
func clusterInfo(addr string) (map[string]string, error) {
	c, err := dialRESP(addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.clusterInfo()
}

func (c *respConn) clusterInfo() (map[string]string, error) {
	r, err := c.do(time.Second, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	if r.kind != '$' {
		return nil, fmt.Errorf("CLUSTER INFO answered %v", r)
	}
	f := map[string]string{}
	for _, line := range strings.Split(r.str, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f, nil
}

// leader: the node whose role is leader (its term has begun) and whose
// followers all name it and have applied what it had committed.
func (leasehold) leader(addrs []string) (int, error) {
	infos := make([]map[string]string, len(addrs))
	lead := -1
	for i, a := range addrs {
		f, err := clusterInfo(a)
		if err != nil {
			return -1, err
		}
		infos[i] = f
		if f["cluster_role"] == "leader" {
			lead = i
		}
	}
	if lead < 0 {
		return -1, errors.New("no node says cluster_role:leader")
	}
	id := infos[lead]["cluster_node_id"]
	commit, _ := strconv.ParseUint(infos[lead]["cluster_commit_index"], 10, 64)
	for i, f := range infos {
		applied, _ := strconv.ParseUint(f["cluster_applied_index"], 10, 64)
		if f["cluster_leader_id"] != id || applied < commit {
			return -1, fmt.Errorf("%s: leader %q, applied %d of %d", addrs[i], f["cluster_leader_id"], applied, commit)
		}
	}
	return lead, nil
}

func (l leasehold) cycles(addr string, o cycleOpts) (*cycleResult, error) {
	type worker struct {
		c                      *respConn
		hist                   hist.Histogram
		cycles, grants, errors uint64
		firstErr               error
	}
	workers := make([]*worker, o.conns)
	for i := range workers {
		c, err := dialRESP(addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		workers[i] = &worker{c: c}
	}
	start := time.Now()
	end := start.Add(o.dur)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := make([]string, o.pipeline)
			tokens := make([]string, o.pipeline)
			ttl := strconv.FormatInt(o.ttlMs, 10)
			for time.Now().Before(end) {
				batch := lhBatch
				if l.redisProto {
					batch = libBatch
				}
				if err := batch(w.c, o, keys, tokens, ttl, &w.hist, &w.grants); err != nil {
					w.errors++
					w.firstErr = err
					return // the stream may be out of step: stop this connection
				}
				w.cycles += uint64(o.pipeline)
			}
		}()
	}
	wg.Wait()
	res := &cycleResult{ElapsedS: time.Since(start).Seconds()}
	var h hist.Histogram
	for _, w := range workers {
		h.Merge(&w.hist)
		res.Cycles += w.cycles
		res.Grants += w.grants
		res.Errors += w.errors
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
	}
	res.Latency = h.Summary()
	return res, nil
}

// lhBatch sends len(keys) ACQUIREs in one write, reads their replies, then
// sends the RELEASEs of those granted in one write and reads those: the
// cycle of scripts/loadgen. A cycle's latency ends at its release's reply
// (at its acquire's reply when not granted).
func lhBatch(c *respConn, o cycleOpts, keys, tokens []string, ttl string, h *hist.Histogram, grants *uint64) error {
	for i := range keys {
		keys[i] = o.prefix + strconv.Itoa(rand.IntN(o.keys))
		c.add("ACQUIRE", keys[i], ttl)
	}
	sent := time.Now()
	if err := c.flush(); err != nil {
		return err
	}
	won := 0
	for i := range keys {
		r, err := c.read()
		switch {
		case err != nil:
			return err
		case r.isErr():
			return fmt.Errorf("ACQUIRE: %s", r.str)
		case r.null:
			tokens[i] = ""
			h.Record(time.Since(sent))
		case r.kind == ':':
			tokens[i] = strconv.FormatInt(r.n, 10)
			won++
		default:
			return fmt.Errorf("ACQUIRE: unexpected reply %v", r)
		}
	}
	*grants += uint64(won)
	return releaseTaken(c, "RELEASE", won, tokens, sent, h, func(i int) { c.add("RELEASE", keys[i], tokens[i]) })
}

// releaseSHA1 is the SHA1 of redis-py's Lock.release script, which every
// leasehold node knows.
const releaseSHA1 = "c3f8721cbb97f72bc19e972846bd7aaf91901658"

// libBatch is lhBatch as a Redis lock library does it: len(keys) SET NX
// PX, each with a token of its own, in one write, then the releases by
// EVALSHA of those taken.
func libBatch(c *respConn, o cycleOpts, keys, tokens []string, ttl string, h *hist.Histogram, grants *uint64) error {
	for i := range keys {
		keys[i] = o.prefix + strconv.Itoa(rand.IntN(o.keys))
		tokens[i] = strconv.FormatUint(rand.Uint64(), 16)
		c.add("SET", keys[i], tokens[i], "NX", "PX", ttl)
	}
	sent := time.Now()
	if err := c.flush(); err != nil {
		return err
	}
	won := 0
	for i := range keys {
		r, err := c.read()
		switch {
		case err != nil:
			return err
		case r.isErr():
			return fmt.Errorf("SET: %s", r.str)
		case r.null:
			tokens[i] = ""
			h.Record(time.Since(sent))
		case r.kind == '+':
			won++
		default:
			return fmt.Errorf("SET: unexpected reply %v", r)
		}
	}
	*grants += uint64(won)
	return releaseTaken(c, "EVALSHA", won, tokens, sent, h, func(i int) { c.add("EVALSHA", releaseSHA1, "1", keys[i], tokens[i]) })
}

// releaseTaken is a batch's second half, lhBatch's and libBatch's alike:
// the release of each key taken (tokens[i] set, won of them), added by
// release(i), sent in one write, and their replies, integers, read; each
// cycle's latency ends at its release's reply.
func releaseTaken(c *respConn, name string, won int, tokens []string, sent time.Time, h *hist.Histogram, release func(i int)) error {
	for i := range tokens {
		if tokens[i] != "" {
			release(i)
		}
	}
	if won == 0 {
		return nil
	}
	if err := c.flush(); err != nil {
		return err
	}
	for range won {
		r, err := c.read()
		switch {
		case err != nil:
			return err
		case r.isErr():
			return fmt.Errorf("%s: %s", name, r.str)
		case r.kind != ':':
			return fmt.Errorf("%s: unexpected reply %v", name, r)
		}
		h.Record(time.Since(sent))
	}
	return nil
}

func (leasehold) failover(addrs []string, pids []int, lead int, timeout time.Duration) (*failoverResult, error) {
	survivors := others(addrs, lead)
	conns := make([]*respConn, len(survivors))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i, a := range survivors {
		c, err := dialRESP(a, time.Second)
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	res := &failoverResult{Answers: map[string]int{}}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	killed := time.Now()
	if err := killProcess(pids[lead]); err != nil {
		return nil, err
	}
	deadline := killed.Add(timeout)
	for time.Now().Before(deadline) {
		for i, a := range survivors {
			res.Attempts++
			if conns[i] == nil {
				c, err := dialRESP(a, 500*time.Millisecond)
				if err != nil {
					res.Answers["dial error"]++
					continue
				}
				conns[i] = c
			}
			// A fresh key each attempt: an attempt whose outcome was
			// uncertain may still be granted later.
			key := "failover:" + run + ":" + strconv.Itoa(res.Attempts)
			r, err := conns[i].do(time.Second, "ACQUIRE", key, "10000")
			switch {
			case err != nil:
				res.Answers["connection error"]++
				conns[i].Close()
				conns[i] = nil
			case r.kind == ':':
				res.Ms = float64(time.Since(killed).Microseconds()) / 1000
				res.GrantedVia = a
				return res, nil
			case r.isErr():
				code, _, _ := strings.Cut(r.str, " ")
				res.Answers[code]++
				if res.ElectedMs == 0 {
					// When the election ended: the rest is the new
					// leader beginning its term.
					if f, err := conns[i].clusterInfo(); err == nil && strings.HasPrefix(f["cluster_role"], "leader") {
						res.ElectedMs = float64(time.Since(killed).Microseconds()) / 1000
					}
				}
			default:
				res.Answers[r.String()]++
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil, fmt.Errorf("no ACQUIRE granted within %v of the kill (answers %v)", timeout, res.Answers)
}
