package protocol

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/locker"
	"github.com/tidwall/redcon"
)

// mineOnly is an OwnerView as the server makes one for a user: leases whose
// owner starts with "me/" are shown without that prefix, others hidden.
func mineOnly(owner string) (string, bool) {
	rest, ok := strings.CutPrefix(owner, "me/")
	return rest, ok
}

// TestOwnerViewHidesOthersLeases: an OwnerView hides the token and owner of
// the leases it does not show, in STATUS and HOLDERS, and the last token
// while another's lease is live; a lease it shows keeps its token, with
// the owner as the view shows it.
func TestOwnerViewHidesOthersLeases(t *testing.T) {
	rest := []string{"default-ttl", "0", "created", "0", "lock-delay", "0", "delay-left", "0", "waiters", "0", "limit", "0"}
	status := func(token, owner, ttl, last, mode string, holders ...string) string {
		fields := append([]string{"state", "held", "token", token, "owner", owner, "ttl", ttl, "last-token", last}, rest...)
		return statusReply(append(fields, "mode", mode), holders...)
	}
	tests := []struct {
		name string
		st   locker.Status
		want string
	}{
		{"own exclusive lease", locker.Status{Held: true, Token: 7, Owner: "me/job", TTL: time.Second, LastToken: 7,
			Holders: []locker.Holder{{Token: 7, Owner: "me/job", TTL: time.Second}}, HoldersTotal: 1},
			status("7", "job", "1000", "7", "exclusive", holderEntry("7", "job", "1000"))},
		{"another's exclusive lease", locker.Status{Held: true, Token: 7, Owner: "bob/job", TTL: time.Second, LastToken: 7,
			Holders: []locker.Holder{{Token: 7, Owner: "bob/job", TTL: time.Second}}, HoldersTotal: 1},
			status("", "", "1000", "", "exclusive", holderEntry("", "", "1000"))},
		{"an anonymous lease of no user", locker.Status{Held: true, Token: 7, TTL: time.Second, LastToken: 7,
			Holders: []locker.Holder{{Token: 7, TTL: time.Second}}, HoldersTotal: 1},
			status("", "", "1000", "", "exclusive", holderEntry("", "", "1000"))},
		{"readers, one own", locker.Status{Held: true, Shared: true, LastToken: 9, HoldersTotal: 2,
			Holders: []locker.Holder{{Token: 8, Owner: "me/r", TTL: time.Second, Shared: true}, {Token: 9, Owner: "bob/r", TTL: time.Second, Shared: true}}},
			status("0", "", "0", "", "shared", holderEntry("8", "r", "1000"), holderEntry("", "", "1000"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := written(t, func(w *redcon.Writer) { WriteStatus(w, tt.st, mineOnly) })
			if got != tt.want {
				t.Fatalf("WriteStatus(%+v)\n got %q\nwant %q", tt.st, got, tt.want)
			}
		})
	}
	free := locker.Status{LastToken: 9}
	if got, want := written(t, func(w *redcon.Writer) { WriteStatus(w, free, mineOnly) }),
		written(t, func(w *redcon.Writer) { WriteStatus(w, free, nil) }); got != want {
		t.Fatalf("a free lock's last token is hidden: %q, want %q", got, want)
	}
	page := []locker.Holder{{Token: 1, Owner: "me/a", TTL: time.Second}, {Token: 2, Owner: "x", TTL: time.Second}}
	got := written(t, func(w *redcon.Writer) { WriteHolders(w, 0, page, mineOnly) })
	if want := "*2\r\n$1\r\n0\r\n*2\r\n" + holderEntry("1", "a", "1000") + holderEntry("", "", "1000"); got != want {
		t.Fatalf("WriteHolders with a view\n got %q\nwant %q", got, want)
	}
}
