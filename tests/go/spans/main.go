// spans: a program whose calls nest in known ways, for gtrace's span() tests. It prints
// "ready", waits for a line on stdin (so the test can attach first), then runs checkouts
// on several goroutines at once: checkout calls price and charge, charge calls audit,
// and charge fails for every third user. Around each call the caller reads the wall
// clock; it prints one truth line per call (function, user, start and end in Unix
// nanoseconds, the function of the traced call it was made in, whether it failed, how
// long it slept at least, the attributes its span carries besides the user), then
// "---", and waits until stdin is closed.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

type call struct {
	fn, parent string
	user       int
	start, end int64
	failed     bool
	slept      time.Duration
	attrs      string // the attributes a span of the call should carry, besides user
}

// The attributes of the call under way on each of the traced functions' callers.
var attrsOf = map[string]func(user int) string{
	"main.audit":  func(int) string { return "note=charged" },
	"main.charge": func(user int) string { return fmt.Sprintf("amount=%d", user*10) },
}

// The sleeps of each function, by user.
func auditSleep() time.Duration         { return 200 * time.Microsecond }
func priceSleep(user int) time.Duration { return time.Duration(user%4+1) * 300 * time.Microsecond }
func chargeSleep(user int) time.Duration {
	if user%3 == 0 {
		return auditSleep()
	}
	return auditSleep() + 500*time.Microsecond
}

var (
	mu    sync.Mutex
	calls []call
)

func timed(fn, parent string, user int, slept time.Duration, f func() error) error {
	start := time.Now().UnixNano()
	err := f()
	end := time.Now().UnixNano()
	mu.Lock()
	attrs := "-"
	if a, ok := attrsOf[fn]; ok {
		attrs = a(user)
	}
	calls = append(calls, call{fn, parent, user, start, end, err != nil, slept, attrs})
	mu.Unlock()
	return err
}

// Every parameter is used: an unused one is dead at the entry, and Go does not keep it
// across the stack growth of a goroutine's first calls (gtrace would read garbage).
var audited = map[int]string{}

//go:noinline
func audit(user int, note string) {
	time.Sleep(auditSleep())
	mu.Lock()
	audited[user] = note
	mu.Unlock()
}

//go:noinline
func price(user int) int {
	time.Sleep(priceSleep(user))
	return user * 10
}

var errDeclined = errors.New("card declined")

//go:noinline
func charge(user, amount int) error {
	_ = timed("main.audit", "main.charge", user, auditSleep(), func() error { audit(user, "charged"); return nil })
	if user%3 == 0 || amount < 0 {
		return errDeclined
	}
	time.Sleep(500 * time.Microsecond)
	return nil
}

//go:noinline
func checkout(user int) error {
	var amount int
	_ = timed("main.price", "main.checkout", user, priceSleep(user), func() error { amount = price(user); return nil })
	return timed("main.charge", "main.checkout", user, chargeSleep(user), func() error { return charge(user, amount) })
}

func main() {
	in := bufio.NewReader(os.Stdin)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	if _, err := in.ReadString('\n'); err != nil {
		return
	}
	var wg sync.WaitGroup
	const workers, each = 4, 6
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				user := w*each + i + 1
				_ = timed("main.checkout", "-", user, priceSleep(user)+chargeSleep(user), func() error { return checkout(user) })
			}
		}(w)
	}
	wg.Wait()
	for _, c := range calls {
		failed := 0
		if c.failed {
			failed = 1
		}
		fmt.Printf("truth-call: %s %d %d %d %s %d %d %s\n", c.fn, c.user, c.start, c.end, c.parent, failed, c.slept.Nanoseconds(), c.attrs)
	}
	fmt.Printf("truth: calls=%d\n", len(calls))
	fmt.Printf("truth-error: %s\n", errDeclined)
	fmt.Println("---")
	in.ReadString('\n')
}
