package command

import (
	"net"
	"strings"
	"testing"

	"github.com/tidwall/redcon"
)

// TestAcquireOutlivedByItsLease: a lease so short that it has ended, and
// its lock is gone, by the time acquire looks whether the key is a
// semaphore (STATUS answers nil) was still granted: acquire prints its
// token and exits 0. It used to release it and fail with "unknown lock",
// exit 2 (seen under load with --ttl 5).
func TestAcquireOutlivedByItsLease(t *testing.T) {
	t.Parallel()
	addr := scriptedServer(t, func(conn redcon.Conn, cmd redcon.Command) {
		switch strings.ToUpper(string(cmd.Args[0])) {
		case "ACQUIRE":
			conn.WriteInt64(42)
		case "STATUS":
			conn.WriteNull() // the lease ran out and the lock went with it
		case "EXTEND":
			// The client renews at once a grant that came later than the
			// ttl (a slow machine): let that succeed.
			conn.WriteInt(1)
		case "RELEASE":
			conn.WriteInt(0)
		default:
			conn.WriteError("ERR unknown command")
		}
	})
	stdout, stderr, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, "acquire", "k", "--ttl", "5")
	if exit != 0 || strings.TrimSpace(stdout) != "42" {
		t.Fatalf("acquire: exit %d, stdout %q, stderr %q; want 0 and the token 42", exit, stdout, stderr)
	}
}

// scriptedServer serves RESP on a loopback port with handle until the test
// ends, and returns its address: a server that answers as a test needs.
func scriptedServer(t *testing.T, handle func(redcon.Conn, redcon.Command)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := redcon.NewServer(ln.Addr().String(), handle, nil, nil)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}
