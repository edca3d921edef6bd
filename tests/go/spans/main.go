// spans: a program whose calls nest in known ways, for gtrace's span() tests. It prints
// "ready", waits for a line on stdin (so the test can attach first), then runs checkouts
// on several goroutines at once: checkout calls price and charge, charge calls audit,
// and charge fails for every third user. Around each call the caller reads the wall
// clock; it prints one truth line per call (function, user, start and end in Unix
// nanoseconds, the function of the traced call it was made in, whether it failed),
// then "---", and waits until stdin is closed.
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
}

var (
	mu    sync.Mutex
	calls []call
)

func timed(fn, parent string, user int, f func() error) error {
	start := time.Now().UnixNano()
	err := f()
	end := time.Now().UnixNano()
	mu.Lock()
	calls = append(calls, call{fn, parent, user, start, end, err != nil})
	mu.Unlock()
	return err
}

//go:noinline
func audit(user int, note string) {
	time.Sleep(200 * time.Microsecond)
}

//go:noinline
func price(user int) int {
	time.Sleep(time.Duration(user%4+1) * 300 * time.Microsecond)
	return user * 10
}

//go:noinline
func charge(user, amount int) error {
	_ = timed("main.audit", "main.charge", user, func() error { audit(user, "charged"); return nil })
	if user%3 == 0 {
		return errors.New("card declined")
	}
	time.Sleep(500 * time.Microsecond)
	return nil
}

//go:noinline
func checkout(user int) error {
	var amount int
	_ = timed("main.price", "main.checkout", user, func() error { amount = price(user); return nil })
	return timed("main.charge", "main.checkout", user, func() error { return charge(user, amount) })
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
				_ = timed("main.checkout", "-", user, func() error { return checkout(user) })
			}
		}(w)
	}
	wg.Wait()
	for _, c := range calls {
		failed := 0
		if c.failed {
			failed = 1
		}
		fmt.Printf("truth-call: %s %d %d %d %s %d\n", c.fn, c.user, c.start, c.end, c.parent, failed)
	}
	fmt.Printf("truth: calls=%d\n", len(calls))
	fmt.Println("---")
	in.ReadString('\n')
}
