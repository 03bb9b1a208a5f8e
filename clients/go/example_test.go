package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	leasehold "github.com/leasehold/leasehold/clients/go"
)

// connect returns a Client for the example server. In a program, set Addr to
// your server's address (DefaultConfig has 127.0.0.1:7379).
func connect() *leasehold.Client {
	cfg := leasehold.DefaultConfig()
	cfg.Redis.Addr = serverAddr
	c, err := leasehold.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	return c
}

func Example() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Acquire(ctx, "reports:nightly", 30*time.Second, leasehold.Wait(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	// Pass lease.Token() to whatever the lock protects; stop when
	// lease.Context() is done.
	fmt.Println("holding", lease.Key(), "with a token:", lease.Token() > 0)
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released")
	// Output:
	// holding reports:nightly with a token: true
	// released
}

func ExampleClient_TryAcquire() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	first, err := c.TryAcquire(ctx, "deploy", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer first.Release(ctx)

	_, err = c.TryAcquire(ctx, "deploy", 30*time.Second)
	fmt.Println(errors.Is(err, leasehold.ErrNotAcquired))
	// Output: true
}

func ExampleClient_Acquire_wait() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	first, err := c.Acquire(ctx, "migrations", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		first.Release(ctx)
	}()
	// Queues fairly on the server; granted the moment first is released.
	second, err := c.Acquire(ctx, "migrations", 30*time.Second, leasehold.Wait(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("token grew:", second.Token() > first.Token())
	// Output: token grew: true
}

func ExampleClient_WithLock() {
	c := connect()
	defer c.Close()

	err := c.WithLock(context.Background(), "invoices", 10*time.Second,
		func(ctx context.Context, token uint64) error {
			// Runs while the lease is kept alive; ctx is cancelled if it is
			// lost. Send token with every write to the protected resource.
			fmt.Println("working under the lock")
			return nil
		}, leasehold.Wait(30*time.Second))
	if errors.Is(err, leasehold.ErrLeaseLost) {
		fmt.Println("the lock was lost while working; the token fences late writes")
	} else if err != nil {
		log.Fatal(err)
	}
	// Output: working under the lock
}

func ExampleLease_Context() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Acquire(ctx, "leader", 3*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	work := lease.Context() // cancelled when the lease is lost or released
	lease.Release(ctx)
	<-work.Done()
	fmt.Println(context.Cause(work))
	// Output: leasehold: lease released
}

func ExampleClient_Status() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Acquire(ctx, "report", 30*time.Second, leasehold.Shared(), leasehold.Owner("reader-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	st, err := c.Status(ctx, "report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.State, st.Mode, len(st.Holders), st.Holders[0].Owner)
	// Output: held shared 1 reader-1
}

func ExampleClient_Holders() {
	c := connect()
	defer c.Close()
	ctx := context.Background()

	if _, err := c.Create(ctx, "builders", leasehold.Limit(150)); err != nil {
		log.Fatal(err)
	}
	for i := range 120 {
		lease, err := c.Acquire(ctx, "builders", time.Minute, leasehold.Owner(fmt.Sprint("builder-", i)), leasehold.NoKeepAlive())
		if err != nil {
			log.Fatal(err)
		}
		defer lease.Release(ctx)
	}
	st, err := c.Status(ctx, "builders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(st.Holders), "of", st.HoldersTotal, "listed by Status")
	n := 0
	for h, err := range c.Holders(ctx, "builders") {
		if err != nil {
			log.Fatal(err)
		}
		if n++; n == 120 {
			fmt.Println("the last is", h.Owner)
		}
	}
	// Output:
	// 100 of 120 listed by Status
	// the last is builder-119
}
