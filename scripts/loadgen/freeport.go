package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// freeportMain prints a loopback TCP port that was free a moment ago.
func freeportMain(args []string) error {
	if len(args) > 0 {
		return errors.New("freeport takes no arguments")
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	fmt.Println(port)
	return nil
}

// freePort returns a loopback port that was free a moment ago, from below
// the kernel's ephemeral range where it can. A port from that range, what
// binding port 0 gives, may be taken before the server binds it as the
// source port of another connection: the bench scripts' clients open
// dozens, and a node then failed to start with "bind: address already in
// use". Below the range only a server binding it by number can take it.
func freePort() (int, error) {
	const lowest = 10000
	if low, ok := ephemeralLow(); ok && low > lowest+100 {
		for range 100 {
			p := lowest + rand.IntN(low-lowest)
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				l.Close()
				return p, nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the lowest port of Linux's ephemeral range, if known.
func ephemeralLow() (int, bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	low, err := strconv.Atoi(f[0])
	return low, err == nil
}
