//go:build linux

package chaos

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Network puts each node in a network namespace of its own, joined to the
// root namespace by a veth pair on a bridge: nodes get 10.213.X.(11+i), the
// bridge (where the clients are) 10.213.X.1. Faults are routes inside a
// node's namespace: a blackhole route to an address drops what the node sends
// there, so a partition is a pair of them and a one-way partition one.
//
// Names carry the test process's pid (lhc<pid>n<i>, lhc<pid>b, lhc<pid>v<i>),
// so a run never meets another's, and SweepStale can remove what a killed
// run left behind.
type Network struct {
	prefix string
	Subnet string // "10.213.X"
	bridge string
	ns     []string

	mu     sync.Mutex // guards routes
	routes map[[2]int]bool
}

// Host is the index Block takes for the root namespace (the clients).
const Host = -1

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chaos: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// NetnsAvailable reports whether namespaces can be made here (root, ip
// netns), with the reason when not.
func NetnsAvailable() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("chaos: no ip command (iproute2): %w", err)
	}
	name := fmt.Sprintf("lhc%dprobe", os.Getpid())
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	return ip("netns", "del", name)
}

var staleName = regexp.MustCompile(`^lhc(\d+)(n\d+|b|probe)$`)

// SweepStale removes the namespaces and bridges of runs whose process is gone.
func SweepStale() {
	alive := func(pid string) bool {
		n, _ := strconv.Atoi(pid)
		return n == os.Getpid() || syscall.Kill(n, 0) == nil
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 {
				if m := staleName.FindStringSubmatch(f[0]); m != nil && !alive(m[1]) {
					_ = ip("netns", "del", f[0])
				}
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 {
				name := strings.TrimSuffix(f[1], ":")
				if m := staleName.FindStringSubmatch(name); m != nil && !alive(m[1]) {
					_ = ip("link", "del", name)
				}
			}
		}
	}
}

// NewNetwork makes n namespaces on a new bridge. Close removes them.
func NewNetwork(n int) (*Network, error) {
	p := fmt.Sprintf("lhc%d", os.Getpid())
	nw := &Network{prefix: p, bridge: p + "b", routes: map[[2]int]bool{}}
	used, _ := exec.Command("ip", "-4", "-o", "addr").Output()
	for x := os.Getpid() % 200; ; x++ {
		if x >= 250 {
			return nil, fmt.Errorf("chaos: no free 10.213.X.0/24 subnet")
		}
		s := fmt.Sprintf("10.213.%d", x+20)
		if !bytes.Contains(used, []byte(s+".")) {
			nw.Subnet = s
			break
		}
	}
	fail := func(err error) (*Network, error) {
		nw.Close()
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "add", nw.bridge, "type", "bridge"},
		{"addr", "add", nw.Subnet + ".1/24", "dev", nw.bridge},
		{"link", "set", nw.bridge, "up"},
	} {
		if err := ip(args...); err != nil {
			return fail(err)
		}
	}
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("%sn%d", p, i+1)
		veth := fmt.Sprintf("%sv%d", p, i+1)
		peer := fmt.Sprintf("%sp%d", p, i+1)
		if err := ip("netns", "add", ns); err != nil {
			return fail(err)
		}
		nw.ns = append(nw.ns, ns)
		for _, args := range [][]string{
			{"link", "add", veth, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", ns},
			{"link", "set", veth, "master", nw.bridge},
			{"link", "set", veth, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "link", "set", peer, "name", "eth0"},
			{"-n", ns, "addr", "add", nw.IP(i) + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
		} {
			if err := ip(args...); err != nil {
				return fail(err)
			}
		}
	}
	return nw, nil
}

// IP is node i's address; Host's is the bridge's.
func (nw *Network) IP(i int) string {
	if i == Host {
		return nw.Subnet + ".1"
	}
	return fmt.Sprintf("%s.%d", nw.Subnet, 11+i)
}

// Namespace is node i's namespace.
func (nw *Network) Namespace(i int) string { return nw.ns[i] }

// Block drops what node from sends to node to (or to Host, the clients).
func (nw *Network) Block(from, to int) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.routes[[2]int{from, to}] {
		return nil
	}
	if err := ip("-n", nw.ns[from], "route", "add", "blackhole", nw.IP(to)+"/32"); err != nil {
		return err
	}
	nw.routes[[2]int{from, to}] = true
	return nil
}

// Unblock undoes Block.
func (nw *Network) Unblock(from, to int) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if !nw.routes[[2]int{from, to}] {
		return nil
	}
	delete(nw.routes, [2]int{from, to})
	return ip("-n", nw.ns[from], "route", "del", "blackhole", nw.IP(to)+"/32")
}

// Split cuts every link between the two groups, both ways.
func (nw *Network) Split(a, b []int) error {
	for _, i := range a {
		for _, j := range b {
			if err := nw.Block(i, j); err != nil {
				return err
			}
			if err := nw.Block(j, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every blocked route.
func (nw *Network) Heal() error {
	nw.mu.Lock()
	var links [][2]int
	for l := range nw.routes {
		links = append(links, l)
	}
	nw.mu.Unlock()
	var first error
	for _, l := range links {
		if err := nw.Unblock(l[0], l[1]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close removes the namespaces (their veths with them) and the bridge.
func (nw *Network) Close() {
	for _, ns := range nw.ns {
		_ = ip("netns", "del", ns)
	}
	nw.ns = nil
	_ = ip("link", "del", nw.bridge)
}

// freePorts finds n free TCP ports on loopback (for nodes not in namespaces).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []interface{ Close() error }
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
