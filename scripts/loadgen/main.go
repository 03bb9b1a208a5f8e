// Command loadgen drives leasehold and Redis with the same lock workloads for
// scripts/bench.sh, and turns the runs' records into the benchmark table.
//
// It speaks RESP through its own small writer and reader over plain net.Conn
// (no client library), so that on a 2-core machine it takes as little CPU as
// it can from the server it measures.
//
//	loadgen cycle  -target leasehold|redis -addr HOST:PORT [-c 50 -P 1 -keys 1000000 -ttl 30000 -n 0 -d 10s]
//	loadgen load   -target ... -addr ... -m 1000000 [-ttl 600000 | -at UNIXMS -t MS -w MS] [-c 4 -P 512]
//	loadgen probe  -target ... -addr ... [-cmd acquire|ping -interval 1ms -d 2s -start UNIXMS]
//	loadgen watch  -target ... -addr ... [-start UNIXMS -interval 10ms -timeout 30s]
//	loadgen report -in RAW.jsonl [-json OUT.json] [-csv OUT.csv]
//	loadgen freeport
//	loadgen field PATH... < LINE.json   (prints the fields, e.g. latency.p99_ms, one a line)
//
// Every mode but report and freeport prints one JSON line on stdout. A run
// whose server answered an error still prints its line, then exits 1.
// -cpuprofile FILE writes the generator's own CPU profile.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: loadgen cycle|load|probe|watch|report|freeport [flags] (see the package doc)")
	}
	modes := map[string]func([]string) error{
		"cycle":    cycleMain,
		"load":     loadMain,
		"probe":    probeMain,
		"watch":    watchMain,
		"report":   reportMain,
		"freeport": freeportMain,
		"field":    fieldMain,
	}
	m, ok := modes[args[0]]
	if !ok {
		return fmt.Errorf("unknown mode %q", args[0])
	}
	return m(args[1:])
}

// commonFlags are the flags of every mode that talks to a server.
type commonFlags struct {
	targetName string
	addr       string
	cpuProfile string
}

func addCommon(fs *flag.FlagSet) *commonFlags {
	c := &commonFlags{}
	fs.StringVar(&c.targetName, "target", "leasehold", "leasehold or redis")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7379", "server address, HOST:PORT")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the generator's CPU profile to this file")
	return c
}

// target parses -target and starts the CPU profile if one was asked for;
// emit stops it.
func (c *commonFlags) target() (*target, error) {
	t, err := parseTarget(c.targetName)
	if err != nil {
		return nil, err
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		profiling = f
	}
	return t, nil
}

var profiling *os.File

// header is the part of every mode's JSON line that says what ran where.
type header struct {
	Mode       string  `json:"mode"`
	Target     string  `json:"target"`
	Addr       string  `json:"addr"`
	ElapsedS   float64 `json:"elapsed_s"`
	Errors     uint64  `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	ClientUser float64 `json:"client_user_s"` // the generator's own CPU during the run
	ClientSys  float64 `json:"client_sys_s"`
}

func newHeader(mode string, t *target, addr string, elapsed time.Duration, cpu0, cpu1 cpuTimes) header {
	return header{
		Mode:       mode,
		Target:     t.String(),
		Addr:       addr,
		ElapsedS:   elapsed.Seconds(),
		ClientUser: cpu1.user - cpu0.user,
		ClientSys:  cpu1.sys - cpu0.sys,
	}
}

// emit prints v as one JSON line; it fails when the run saw server errors,
// after printing, so the numbers are still there to look at.
func emit(v any, errs uint64) error {
	if profiling != nil {
		pprof.StopCPUProfile()
		profiling.Close()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if errs > 0 {
		return fmt.Errorf("%d errors during the run (first_error in the JSON line)", errs)
	}
	return nil
}

type cpuTimes struct{ user, sys float64 }

// fieldMain prints fields of the JSON object on stdin, one a line, so the
// bench script needs no jq: "latency.p99_ms" walks into nested objects.
func fieldMain(paths []string) error {
	var v map[string]any
	dec := json.NewDecoder(os.Stdin)
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("field: %w", err)
	}
	for _, p := range paths {
		var cur any = v
		for _, part := range strings.Split(p, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return fmt.Errorf("field: %s: not an object at %q", p, part)
			}
			if cur, ok = m[part]; !ok {
				return fmt.Errorf("field: %s: no %q", p, part)
			}
		}
		fmt.Println(cur)
	}
	return nil
}

// sleepUntil waits for a wall-clock instant given in Unix milliseconds
// (0: do not wait).
func sleepUntil(unixMs int64) {
	if unixMs <= 0 {
		return
	}
	if d := time.Until(time.UnixMilli(unixMs)); d > 0 {
		time.Sleep(d)
	}
}
