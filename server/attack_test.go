package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// The attacks of issue 14, "tried as a hostile client would, with nothing
// but a connection", each made by mallory, a user with the same keys and
// channels as alice, her victim, and the read and lock categories (not
// manage, not admin). Before users existed, each one succeeded.

const attackACL = `
user default off
user admin on >admin-pw ~* &* +@all
user alice on >alice-pw ~jobs:* &__lock__:jobs:* +@read +@lock
user mallory on >mallory-pw ~jobs:* &__lock__:jobs:* +@read +@lock
`

func TestAttacksOfAnotherUserFail(t *testing.T) {
	ts := startServer(t, withACLFile(t, attackACL))
	alice := ts.userClient("alice", "alice-pw")
	mallory := ts.userClient("mallory", "mallory-pw")
	admin := ts.userClient("admin", "admin-pw")

	// STATUS shows mallory neither alice's token nor her owner, and RELEASE,
	// MRELEASE and EXTEND with the token (which mallory could guess: tokens
	// count up) leave the lease as it was.
	tok := do(t, alice, "ACQUIRE", "jobs:a", 60000, "OWNER", "worker-1").Token()
	st := do(t, mallory, "STATUS", "jobs:a").Fields()
	if st["state"] != "held" || st["token"] != "" || st["owner"] != "" || st["last-token"] != "" {
		t.Errorf("mallory's STATUS of alice's lock = %v: want held, with token, owner and last-token hidden", st)
	}
	holders := do(t, mallory, "HOLDERS", "jobs:a", 0).Slice()
	if got := holders[1].([]any)[0].([]any); got[1] != "" || got[3] != "" {
		t.Errorf("mallory's HOLDERS entry = %v: want token and owner hidden", got)
	}
	if st := do(t, alice, "STATUS", "jobs:a").Fields(); st["token"] != strconv.FormatUint(tok, 10) || st["owner"] != "worker-1" {
		t.Errorf("alice's STATUS of her own lock = %v: want her token %d and owner worker-1", st, tok)
	}
	if st := do(t, admin, "STATUS", "jobs:a").Fields(); st["token"] != strconv.FormatUint(tok, 10) || st["owner"] != "alice:worker-1" {
		t.Errorf("admin's STATUS = %v: want token %d and owner alice:worker-1", st, tok)
	}
	do(t, mallory, "RELEASE", "jobs:a", tok).Is(0)
	do(t, mallory, "MRELEASE", "jobs:a", tok).Is(0)
	do(t, mallory, "EXTEND", "jobs:a", tok, 86400000).Is(0)
	do(t, alice, "VERIFY", "jobs:a", tok).Is(1)
	if ttl := ttlOf(t, alice, "jobs:a"); ttl > 60000 {
		t.Errorf("alice's lease ttl %d ms after mallory's EXTEND to a day: want it unchanged (<= 60000)", ttl)
	}

	// ACQUIRE ... OWNER <alice's owner> neither returns alice's token nor
	// cuts her lease short: mallory's owner id is another owner.
	do(t, mallory, "ACQUIRE", "jobs:a", 1, "OWNER", "worker-1").Nil()
	if ttl := ttlOf(t, alice, "jobs:a"); ttl < 1000 {
		t.Errorf("alice's lease ttl %d ms after mallory's ACQUIRE 1 ms with her owner id: want it unchanged", ttl)
	}
	do(t, alice, "VERIFY", "jobs:a", tok).Is(1)

	// CREATE <victim's lock> LOCKDELAY 86400000 needs @manage.
	do(t, mallory, "CREATE", "jobs:a", "LOCKDELAY", 86400000).Err("NOPERM")

	// Re-sending ACQUIRE ... OWNER <alice's owner> WAIT does not take alice's
	// place in the queue: alice, queued first, is granted first.
	aliceWait := ts.userClient("alice", "alice-pw")
	aliceGot := make(chan reply, 1)
	go func() { aliceGot <- do(t, aliceWait, "ACQUIRE", "jobs:a", 60000, "OWNER", "worker-2", "WAIT", 10000) }()
	testutil.Eventually(t, 5*time.Second, "alice queued", func() bool {
		return do(t, admin, "STATUS", "jobs:a").Fields()["waiters"] == "1"
	})
	// Sweeping CLIENT UNBLOCK over every id cancels nobody else's wait.
	for id := range int64(64) {
		if n := do(t, mallory, "CLIENT", "UNBLOCK", id).Int(); n != 0 {
			t.Errorf("mallory's CLIENT UNBLOCK %d = %d: unblocked alice's wait", id, n)
		}
	}
	malloryWait := ts.userClient("mallory", "mallory-pw")
	malloryGot := make(chan reply, 1)
	go func() {
		malloryGot <- do(t, malloryWait, "ACQUIRE", "jobs:a", 60000, "OWNER", "worker-2", "WAIT", 10000)
	}()
	testutil.Eventually(t, 5*time.Second, "both queued", func() bool {
		return do(t, admin, "STATUS", "jobs:a").Fields()["waiters"] == "2"
	})

	do(t, alice, "RELEASE", "jobs:a", tok).Is(1)
	next := (<-aliceGot).Token()
	if next <= tok {
		t.Errorf("alice's queued ACQUIRE got token %d, want above %d", next, tok)
	}
	do(t, alice, "RELEASE", "jobs:a", next).Is(1)
	(<-malloryGot).Token()

	// What mallory sees of the server: not every lock, not INFO, and not
	// every channel.
	do(t, admin, "ACQUIRE", "other:secret", 60000).Token()
	if got := do(t, mallory, "LOCKS", 0, "COUNT", 1000).Slice(); strings.Contains(strings.Join(stringsOf(got[1]), ","), "other:") {
		t.Errorf("mallory's LOCKS = %v: lists a lock outside her key patterns", got)
	}
	do(t, mallory, "INFO").Err("NOPERM")
	do(t, mallory, "PSUBSCRIBE", "*").Err("NOPERM")
}

// TestEventsHideOtherUsersLeases: a subscriber sees the token and owner of
// its own user's leases only; an admin sees every one, owners as user:owner.
func TestEventsHideOtherUsersLeases(t *testing.T) {
	ts := startServer(t, withACLFile(t, attackACL))
	alice := ts.userClient("alice", "alice-pw")
	ctx := context.Background()
	listen := func(user, pw string) *redis.PubSub {
		ps := ts.userClient(user, pw).Subscribe(ctx, "__lock__:jobs:e")
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatalf("%s's SUBSCRIBE: %v", user, err)
		}
		t.Cleanup(func() { ps.Close() })
		return ps
	}
	mine, theirs, admins := listen("alice", "alice-pw"), listen("mallory", "mallory-pw"), listen("admin", "admin-pw")
	tok := do(t, alice, "ACQUIRE", "jobs:e", 60000, "OWNER", "w").Token()
	for _, tc := range []struct {
		who  string
		ps   *redis.PubSub
		want string
	}{
		{"alice", mine, "acquired " + strconv.FormatUint(tok, 10) + " w"},
		{"mallory", theirs, "acquired"},
		{"admin", admins, "acquired " + strconv.FormatUint(tok, 10) + " alice:w"},
	} {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		msg, err := tc.ps.ReceiveMessage(c)
		cancel()
		if err != nil || msg.Payload != tc.want {
			t.Errorf("%s's event = %v, %v; want %q", tc.who, msg, err, tc.want)
		}
	}
}

// ttlOf is STATUS's ttl of key, in ms, as rdb sees it.
func ttlOf(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(do(t, rdb, "STATUS", key).Fields()["ttl"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func stringsOf(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
