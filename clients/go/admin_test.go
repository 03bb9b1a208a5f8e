package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"testing"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
	"github.com/leasehold/leasehold/internal/servertest/lockserver"
)

func TestCreateDelete(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)

	made, err := c.Create(ctx, "jobs", leasehold.DefaultTTL(20*time.Second), leasehold.LockDelay(2*time.Second))
	if err != nil || !made {
		t.Fatalf("Create: %v, %v", made, err)
	}
	st, err := c.Status(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Created || st.DefaultTTL != 20*time.Second || st.LockDelay != 2*time.Second || st.Limit != 0 {
		t.Errorf("created lock: %+v", st)
	}
	// A second Create changes nothing.
	if made, err := c.Create(ctx, "jobs", leasehold.Limit(3)); err != nil || made {
		t.Fatalf("Create of an existing lock: %v, %v; want false", made, err)
	}
	if st, _ := c.Status(ctx, "jobs"); st.Limit != 0 {
		t.Errorf("the second Create changed the limit to %d", st.Limit)
	}
	// LockDelay(0) is sent: the lock has none, whatever the server's default.
	if made, err := c.Create(ctx, "sem", leasehold.Limit(3), leasehold.LockDelay(0)); err != nil || !made {
		t.Fatalf("Create of a semaphore: %v, %v", made, err)
	}
	if st, _ := c.Status(ctx, "sem"); st.Limit != 3 || st.LockDelay != 0 {
		t.Errorf("semaphore: %+v", st)
	}
	if _, err := c.Create(ctx, "bad", leasehold.Limit(70000)); err == nil {
		t.Error("Create with LIMIT 70000 succeeded")
	}
	if _, err := c.Create(ctx, "bad", leasehold.DefaultTTL(-time.Second)); err == nil {
		t.Error("Create with a negative ttl succeeded")
	}

	l, err := c.Acquire(ctx, "jobs", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, "jobs"); !errors.Is(err, leasehold.ErrInUse) {
		t.Errorf("Delete of a held lock: %v, want ErrInUse", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Delete(ctx, "jobs"); err != nil || !ok {
		t.Fatalf("Delete: %v, %v", ok, err)
	}
	if ok, err := c.Delete(ctx, "jobs"); err != nil || ok {
		t.Fatalf("Delete of an unknown lock: %v, %v; want false", ok, err)
	}
	// LIMIT cannot turn a held lock made on the fly into a semaphore.
	l, err = c.Acquire(ctx, "fly", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if _, err := c.Create(ctx, "fly", leasehold.Limit(2)); !errors.Is(err, leasehold.ErrInUse) {
		t.Errorf("Create LIMIT of a held lock made on the fly: %v, want ErrInUse", err)
	}
}

func TestLocks(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)
	// More than one page of LOCKS.
	var want []string
	for i := range 2500 {
		name := fmt.Sprintf("job:%04d", i)
		if _, err := c.Create(ctx, name); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	if _, err := c.Create(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for name, err := range c.Locks(ctx, "job:*") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("Locks(job:*): %d names, want %d", len(got), len(want))
	}
	n := 0
	for _, err := range c.Locks(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(want)+1 {
		t.Errorf("Locks(\"\"): %d names, want %d", n, len(want)+1)
	}
	// Breaking out of the loop stops the iteration.
	n = 0
	for range c.Locks(ctx, "*") {
		n++
		break
	}
	if n != 1 {
		t.Errorf("%d names after a break", n)
	}
	c.Close()
	for _, err := range c.Locks(ctx, "*") {
		if err == nil {
			t.Error("Locks on a closed client yielded no error")
		}
	}
}

func TestInfo(t *testing.T) {
	srv := lockserver.Start(t).Server
	c := newClient(t, srv.Addr().String())
	ctx := testContext(t)
	if _, err := c.Create(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info["server"]["leasehold_version"] != "test" || info["locks"]["locks"] != "1" {
		t.Errorf("INFO: %v", info)
	}
	info, err = c.Info(ctx, "locks")
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != 1 || info["locks"]["max_ttl_ms"] != "86400000" {
		t.Errorf("INFO locks: %v", info)
	}
}

func ExampleClient_Create() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	// A semaphore: up to two holders at once.
	made, err := c.Create(ctx, "example:builders", leasehold.Limit(2))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", made)
	made, _ = c.Create(ctx, "example:builders", leasehold.Limit(2))
	fmt.Println("created again:", made)

	deleted, err := c.Delete(ctx, "example:builders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted:", deleted)
	// Output:
	// created: true
	// created again: false
	// deleted: true
}

func ExampleClient_Locks() {
	c := connect()
	defer c.Close()
	ctx := context.Background()
	for _, name := range []string{"example:queue:b", "example:queue:a"} {
		if _, err := c.Create(ctx, name); err != nil {
			log.Fatal(err)
		}
		defer c.Delete(ctx, name)
	}

	var names []string
	for name, err := range c.Locks(ctx, "example:queue:*") {
		if err != nil {
			log.Fatal(err)
		}
		names = append(names, name)
	}
	slices.Sort(names) // LOCKS returns them in no particular order
	fmt.Println(names)
	// Output: [example:queue:a example:queue:b]
}
