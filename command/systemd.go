package command

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/leasehold/leasehold/server"
	"github.com/rs/zerolog"
)

// notifySystemd speaks systemd's notify protocol (Type=notify,
// WatchdogSec; scripts/leasehold.service) for srv, and does nothing
// when NOTIFY_SOCKET is unset. It sends READY=1 when the server begins to
// serve (server.Server.Serving): recovery is done (server.New) and
// connections are accepted. In cluster mode that may be before a leader is
// known, which STATUS then says: a member that waited for one would hold
// systemctl start until the others were up. With the watchdog on
// (WATCHDOG_USEC), it sends WATCHDOG=1 every half interval for as long as
// each PING is answered, so that systemd restarts a server that hangs. It
// sends STOPPING=1 when ctx ends (SIGTERM: the drain begins) or at stop.
//
// Its goroutine is owned by the returned stop, which ends it and waits for
// it; call stop once the server has shut down.
func notifySystemd(ctx context.Context, log zerolog.Logger, srv *server.Server) (stop func()) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return func() {}
	}
	log = log.With().Str("notify_socket", os.Getenv("NOTIFY_SOCKET")).Logger()
	watchdog, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn().Err(err).Msg("systemd watchdog: ignoring WATCHDOG_USEC")
		watchdog = 0
	}
	notify := func(state string) {
		if _, err := daemon.SdNotify(false, state); err != nil {
			log.Warn().Err(err).Str("state", state).Msg("systemd notify failed")
		}
	}
	stopC, doneC := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(doneC)
		defer notify(daemon.SdNotifyStopping)
		select {
		case <-srv.Serving():
		case <-ctx.Done():
			return
		case <-stopC:
			return
		}
		status := "serving"
		if ready, why := srv.Ready(); !ready {
			status += " (" + why + ")"
		}
		notify(daemon.SdNotifyReady + "\nSTATUS=" + status)
		log.Debug().Dur("watchdog", watchdog).Msg("systemd notified: ready")
		if watchdog <= 0 {
			select {
			case <-ctx.Done():
			case <-stopC:
			}
			return
		}
		tick := time.NewTicker(watchdog / 2)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			case <-stopC:
				return
			}
			// A missed ping is systemd's to act on (WatchdogSec), not ours.
			if answers(srv, watchdog/2) {
				notify(daemon.SdNotifyWatchdog)
			} else {
				log.Warn().Dur("watchdog", watchdog).Msg("systemd watchdog: the server did not answer PING; no WATCHDOG=1 this round")
			}
		}
	}()
	return func() {
		select {
		case <-stopC:
		default:
			close(stopC)
		}
		<-doneC
	}
}

// answers reports whether srv answers a PING on its plain listener (any
// reply will do: -NOAUTH too) within timeout, over loopback when it listens
// on every address. With a TLS listener only, a TCP connection accepted is
// the answer: a handshake may need a client certificate.
func answers(srv *server.Server, timeout time.Duration) bool {
	addr, plain := srv.Addr(), true
	if addr == nil {
		if addr, plain = srv.TLSAddr(), false; addr == nil {
			return false // not listening yet
		}
	}
	target := addr.String()
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		loopback := net.IPv4(127, 0, 0, 1)
		if tcp.IP.To4() == nil {
			loopback = net.IPv6loopback
		}
		target = net.JoinHostPort(loopback.String(), fmt.Sprint(tcp.Port))
	}
	nc, err := net.DialTimeout("tcp", target, timeout)
	if err != nil {
		return false
	}
	defer nc.Close()
	if !plain {
		return true
	}
	nc.SetDeadline(time.Now().Add(timeout))
	if _, err := nc.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return false
	}
	reply, err := bufio.NewReader(nc).ReadString('\n')
	return err == nil && (reply[0] == '+' || reply[0] == '-')
}
