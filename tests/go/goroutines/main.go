// goroutines: the cases where keying per-call state by thread goes wrong. Each mode prints
// its own truth as `key=value` words for tests/goroutines.rs.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// work yields several times, so its goroutine may resume on another thread.
//
//go:noinline
func work(id int) int {
	for i := 0; i < 3; i++ {
		runtime.Gosched()
	}
	return id
}

//go:noinline
func nap(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

//go:noinline
func mayPanic(i int) int {
	if i%2 == 0 {
		panic("even")
	}
	return i
}

func safe(i int) (r int) {
	defer func() {
		if recover() != nil {
			r = -1
		}
	}()
	return mayPanic(i)
}

//go:noinline
func setter(v int) int { return v }

// tick is a short call that many goroutines make at once.
//
//go:noinline
func tick(i int) int { return i + 1 }

// hold blocks until release is closed: its call stays in flight until then.
//
//go:noinline
func hold(entered *sync.WaitGroup, release chan struct{}) int {
	entered.Done()
	<-release
	return 1
}

func main() {
	mode := os.Args[1]
	n, _ := strconv.Atoi(os.Args[2])
	var wg sync.WaitGroup
	switch mode {
	case "gosched":
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(id int) { defer wg.Done(); work(id) }(i)
		}
		wg.Wait()
		fmt.Printf("calls=%d\n", n)
	case "sleep":
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); nap(20) }()
		}
		wg.Wait()
		fmt.Printf("calls=%d sleep_ms=20\n", n)
	case "panic":
		returned := 0
		for i := 0; i < n; i++ {
			if safe(i) >= 0 {
				returned++
			}
		}
		fmt.Printf("calls=%d returned=%d\n", n, returned)
	case "exit":
		// Goroutines in batches, each setting a self variable and exiting.
		for b := 0; b < n/1000; b++ {
			for i := 0; i < 1000; i++ {
				wg.Add(1)
				go func(v int) { defer wg.Done(); setter(v) }(b*1000 + i)
			}
			wg.Wait()
		}
		fmt.Printf("calls=%d\n", n/1000*1000)
	case "peak":
		// n goroutines alive at once, which then all exit (the runtime keeps their g's);
		// then "ready", and the program waits for its stdin to close.
		var started sync.WaitGroup
		release := make(chan struct{})
		started.Add(n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); started.Done(); <-release }()
		}
		started.Wait()
		close(release)
		wg.Wait()
		fmt.Printf("peak=%d\nready\n", n)
		// A number on stdin: that many calls of hold in flight at once, as "hold" does.
		var m int
		if _, err := fmt.Scan(&m); err == nil {
			fmt.Printf("calls=%d returned=%d\n", m, holdAll(m))
		}
		io.Copy(io.Discard, os.Stdin)
	case "hold":
		fmt.Printf("calls=%d returned=%d\n", n, holdAll(n))
	case "collide":
		bits, _ := strconv.Atoi(os.Args[4])
		collide(n, os.Args[3], bits)
	}
}

// holdAll starts n goroutines, each with a call of hold in flight at once, then lets
// them all return; it returns how many did.
func holdAll(n int) int64 {
	var wg, entered sync.WaitGroup
	release := make(chan struct{})
	var returned atomic.Int64
	entered.Add(n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); returned.Add(int64(hold(&entered, release))) }()
	}
	entered.Wait()
	close(release)
	wg.Wait()
	return returned.Load()
}
