package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/scripts/internal/hist"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// etcd drives etcd through go.etcd.io/etcd/client/v3's concurrency.Mutex.
type etcd struct{}

// sessionTTL is the sessions' lease, in seconds: concurrency's default.
const sessionTTL = 60

func etcdClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// leader: the member every member names as leader.
func (etcd) leader(addrs []string) (int, error) {
	cli, err := etcdClient(addrs)
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	ids := make([]uint64, len(addrs))
	var lead uint64
	for i, a := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, a)
		cancel()
		if err != nil {
			return -1, fmt.Errorf("%s: %w", a, err)
		}
		ids[i] = st.Header.MemberId
		if st.Leader == 0 || (lead != 0 && st.Leader != lead) {
			return -1, fmt.Errorf("%s: leader %x, others %x", a, st.Leader, lead)
		}
		lead = st.Leader
	}
	for i, id := range ids {
		if id == lead {
			return i, nil
		}
	}
	return -1, fmt.Errorf("leader %x is none of %v", lead, addrs)
}

// cycles: -c clients (one gRPC connection each) with a session each, and
// -P goroutines per client taking and giving back locks on that session.
func (etcd) cycles(addr string, o cycleOpts) (*cycleResult, error) {
	type worker struct {
		hist                   hist.Histogram
		cycles, grants, errors uint64
		firstErr               error
	}
	sessions := make([]*concurrency.Session, o.conns)
	for i := range sessions {
		cli, err := etcdClient([]string{addr})
		if err != nil {
			return nil, err
		}
		defer cli.Close()
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(sessionTTL))
		if err != nil {
			return nil, err
		}
		defer s.Close()
		sessions[i] = s
	}
	workers := make([]*worker, o.conns*o.pipeline)
	start := time.Now()
	end := start.Add(o.dur)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{}
		workers[i] = w
		s := sessions[i/o.pipeline]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				m := concurrency.NewMutex(s, o.prefix+strconv.Itoa(rand.IntN(o.keys)))
				t0 := time.Now()
				err := m.Lock(ctx)
				if err == nil {
					w.grants++
					err = m.Unlock(ctx)
				}
				if err != nil {
					w.errors++
					w.firstErr = err
					return
				}
				w.hist.Record(time.Since(t0))
				w.cycles++
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

func (etcd) failover(addrs []string, pids []int, lead int, timeout time.Duration) (*failoverResult, error) {
	cli, err := etcdClient(others(addrs, lead))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(sessionTTL))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res := &failoverResult{Answers: map[string]int{}}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	// A Lock sent during the election may wait for a leader or fail fast,
	// so the attempts overlap: a new one every 10 ms, each given up to
	// attemptTimeout; the first to be granted ends the measurement. Waiting
	// for one attempt at a time would count in steps of its timeout.
	const attemptTimeout = 2 * time.Second
	type outcome struct {
		err error
		at  time.Time
	}
	done := make(chan outcome, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killed := time.Now()
	if err := killProcess(pids[lead]); err != nil {
		return nil, err
	}
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	pending := 0
	try := func() {
		res.Attempts++
		pending++
		key := "/failover/" + run + "/" + strconv.Itoa(res.Attempts)
		go func() {
			m := concurrency.NewMutex(s, key)
			actx, acancel := context.WithTimeout(ctx, attemptTimeout)
			defer acancel()
			err := m.Lock(actx)
			at := time.Now()
			if err == nil {
				m.Unlock(actx)
			}
			done <- outcome{err, at}
		}()
	}
	try()
	for {
		select {
		case o := <-done:
			pending--
			if o.err == nil {
				res.Ms = float64(o.at.Sub(killed).Microseconds()) / 1000
				res.GrantedVia = "client of " + fmt.Sprint(others(addrs, lead))
				cancel()
				for ; pending > 0; pending-- {
					<-done
				}
				return res, nil
			}
			res.Answers[errKind(o.err)]++
		case <-tick.C:
			if pending < cap(done) {
				try()
			}
		case <-deadline:
			cancel()
			for ; pending > 0; pending-- {
				<-done
			}
			return nil, fmt.Errorf("no Lock granted within %v of the kill (answers %v)", timeout, res.Answers)
		}
	}
}

// errKind is a short name for what a failed Lock got.
func errKind(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

func killProcess(pid int) error {
	return syscall.Kill(pid, syscall.SIGKILL)
}
