//go:build unix

package command

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// lhExpect runs the binary against addr and fails unless it exits with
// wantExit and, when wantErr is not empty, says it on stderr; it returns
// stdout.
func lhExpect(t *testing.T, addr string, wantExit int, wantErr string, args ...string) string {
	t.Helper()
	out, errOut, exit := run(t, []string{"LEASEHOLD_ADDR=" + addr}, args...)
	if exit != wantExit || !strings.Contains(errOut, wantErr) {
		t.Fatalf("leasehold %q: exit %d, stdout %q, stderr %q; want exit %d and %q", args, exit, out, errOut, wantExit, wantErr)
	}
	return out
}

func TestCreateDeleteCommands(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)

	if out := lhExpect(t, addr, 0, "", "create", "--ttl", "20s", "--lock-delay", "2s", "jobs"); out != "true\n" {
		t.Errorf("create printed %q", out)
	}
	st := lockStatus(t, rdb, "jobs")
	if st["created"] != "1" || st["default-ttl"] != "20000" || st["lock-delay"] != "2000" || st["limit"] != "0" {
		t.Errorf("STATUS after create: %v", st)
	}
	if out := lhExpect(t, addr, exitNo, `lock "jobs" exists already`, "create", "--limit", "3", "jobs"); out != "false\n" {
		t.Errorf("create of an existing lock printed %q", out)
	}
	if st := lockStatus(t, rdb, "jobs"); st["limit"] != "0" {
		t.Errorf("the second create changed the lock: %v", st)
	}
	lhExpect(t, addr, 0, "", "create", "--limit", "3", "--lock-delay", "0s", "sem")
	if st := lockStatus(t, rdb, "sem"); st["limit"] != "3" || st["lock-delay"] != "0" {
		t.Errorf("STATUS of the semaphore: %v", st)
	}
	// A lock made on the fly that a lease holds cannot become a semaphore.
	if err := rdb.Do(testCtx(t), "ACQUIRE", "fly", 30000).Err(); err != nil {
		t.Fatal(err)
	}
	lhExpect(t, addr, exitNo, `lock "fly" is held`, "create", "--limit", "2", "fly")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create"}, "one KEY"},
		{[]string{"create", "a", "b"}, "one KEY"},
		{[]string{"create", "--ttl", "0s", "a"}, "--ttl"},
		{[]string{"create", "--lock-delay", "-1s", "a"}, "--lock-delay"},
		{[]string{"create", "--limit", "0", "a"}, "--limit"},
		{[]string{"create", "--limit", "70000", "a"}, "LIMIT must be between"},
		{[]string{"create", "--ttl", "48h", "a"}, "ttl out of range"},
		{[]string{"delete"}, "one KEY"},
	} {
		lhExpect(t, addr, exitFailure, tc.want, tc.args...)
	}

	lhExpect(t, addr, exitNo, `not deleted: INUSE lock is held "fly"`, "delete", "fly")
	if out := lhExpect(t, addr, 0, "", "delete", "jobs"); out != "true\n" {
		t.Errorf("delete printed %q", out)
	}
	if out := lhExpect(t, addr, exitNo, `no lock "jobs"`, "delete", "jobs"); out != "false\n" {
		t.Errorf("delete of an unknown lock printed %q", out)
	}
	lhExpect(t, addr, exitFailure, "connection refused", "delete", "--addr", freeAddr(t), "jobs")
}

func TestLocksCommand(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	lhExpect(t, addr, exitNo, "", "locks")
	if out := lhExpect(t, addr, exitNo, "", "locks", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("locks --json of none: %q", out)
	}
	// More names than one LOCKS call returns.
	var want []string
	for i := range 1500 {
		name := "job:" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "-" + strconv.Itoa(i)
		want = append(want, name)
		if err := rdb.Do(testCtx(t), "CREATE", name).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Do(testCtx(t), "CREATE", "other").Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	got := strings.Fields(lhExpect(t, addr, 0, "", "locks", "job:*"))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("locks job:*: %d names, want %d", len(got), len(want))
	}
	var names []string
	if err := json.Unmarshal([]byte(lhExpect(t, addr, 0, "", "locks", "--json", "job:*")), &names); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("locks --json job:*: %d names, want %d", len(names), len(want))
	}
	if out := lhExpect(t, addr, 0, "", "locks"); len(strings.Fields(out)) != len(want)+1 {
		t.Errorf("locks: %d names, want %d", len(strings.Fields(out)), len(want)+1)
	}
	lhExpect(t, addr, exitNo, "", "locks", "nothing*")
	lhExpect(t, addr, exitFailure, "at most one PATTERN", "locks", "a", "b")
}

func TestInfoCommand(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	out := lhExpect(t, addr, 0, "", "info")
	if !strings.Contains(out, "# Server\n") || !strings.Contains(out, "# Locks\n") || strings.Contains(out, "\r") {
		t.Errorf("info:\n%s", out)
	}
	out = lhExpect(t, addr, 0, "", "info", "locks")
	if strings.Contains(out, "# Server") || !strings.Contains(out, "max_ttl_ms:86400000\n") {
		t.Errorf("info locks:\n%s", out)
	}
	var info map[string]map[string]string
	if err := json.Unmarshal([]byte(lhExpect(t, addr, 0, "", "info", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info["locks"]["max_ttl_ms"] != "86400000" || info["server"]["tcp_addr"] != addr {
		t.Errorf("info --json: %v", info)
	}
	lhExpect(t, addr, exitFailure, "connection refused", "info", "--addr", freeAddr(t))
}

func TestStatusJSON(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	var st struct {
		Key, State, Mode, Owner string
		Token                   uint64
		TTL                     int64 `json:"ttl_ms"`
		Created                 bool
		Waiters, Limit          int
		HoldersTotal            int `json:"holders_total"`
		Holders                 []struct {
			Token uint64
			Owner string
			TTL   int64 `json:"ttl_ms"`
		}
	}
	if err := json.Unmarshal([]byte(lhExpect(t, addr, exitNo, "", "status", "--json", "nope")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Key != "nope" || st.State != "unknown" {
		t.Errorf("status --json of an unknown lock: %+v", st)
	}
	tok := strings.TrimSpace(lhExpect(t, addr, 0, "", "acquire", "--owner", "me", "--ttl", "10s", "jobs"))
	out := lhExpect(t, addr, 0, "", "status", "--json", "jobs")
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"key", "state", "mode", "token", "owner", "ttl_ms", "last_token", "created", "default_ttl_ms", "lock_delay_ms", "delay_left_ms", "waiters", "limit", "holders_total", "holders"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("status --json lacks %q:\n%s", field, out)
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != "held" || st.Mode != "exclusive" || st.Owner != "me" || strconv.FormatUint(st.Token, 10) != tok ||
		st.TTL < 9000 || st.TTL > 10000 || len(st.Holders) != 1 || st.Holders[0].Owner != "me" || st.HoldersTotal != 1 {
		t.Errorf("status --json of a held lock: %+v\n%s", st, out)
	}
	if err := rdb.Do(testCtx(t), "CREATE", "free").Err(); err != nil {
		t.Fatal(err)
	}
	out = lhExpect(t, addr, exitNo, "", "status", "--json", "free")
	if !strings.Contains(out, `"holders": []`) || !strings.Contains(out, `"created": true`) {
		t.Errorf("status --json of a free lock:\n%s", out)
	}
}

func TestHelpListsAdminCommands(t *testing.T) {
	t.Parallel()
	out, _, exit := run(t, nil, "--help")
	if exit != 0 {
		t.Fatalf("--help: exit %d", exit)
	}
	for _, name := range []string{"create", "delete", "locks", "info"} {
		if !strings.Contains(out, "   "+name+" ") {
			t.Errorf("--help does not list %s:\n%s", name, out)
		}
	}
}

// TestStatusOfABigSemaphore: STATUS lists the oldest 100 holders; status
// says how many there are in all, as text and as JSON.
func TestStatusOfABigSemaphore(t *testing.T) {
	t.Parallel()
	_, addr := startServe(t)
	rdb := client(t, addr)
	if err := rdb.Do(testCtx(t), "CREATE", "sem", "LIMIT", 150).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		if err := rdb.Do(testCtx(t), "ACQUIRE", "sem", 60000, "OWNER", "w"+strconv.Itoa(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	out := lhExpect(t, addr, 0, "", "status", "sem")
	if !strings.Contains(out, "holders      150 (the oldest 100 listed)\n") || !strings.Contains(out, " w99 ") || strings.Contains(out, "w100") {
		t.Errorf("status of a semaphore held 150 times:\n%s", out)
	}
	var st struct {
		HoldersTotal int `json:"holders_total"`
		Holders      []struct{ Owner string }
	}
	if err := json.Unmarshal([]byte(lhExpect(t, addr, 0, "", "status", "--json", "sem")), &st); err != nil {
		t.Fatal(err)
	}
	if st.HoldersTotal != 150 || len(st.Holders) != 100 || st.Holders[99].Owner != "w99" {
		t.Errorf("status --json of a semaphore held 150 times: %d of %d holders", len(st.Holders), st.HoldersTotal)
	}
}
