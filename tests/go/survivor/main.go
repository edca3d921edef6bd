// survivor: requests that arrive alone, each waking a thread, each a call of
// main.request and then STEPS calls of main.step: the truth for tests/survivor.rs, which
// traces a wildcard over both ("main.*") under a budget that cuts main.step and keeps
// main.request, and main.request alone.
//
//	survivor RATE WORKERS STEPS SECS
//
// WORKERS goroutines each make their share of RATE requests a second at paced times,
// sleeping until each (an open loop: a request late is not followed by others sent
// early to catch up), for SECS seconds. At the end it prints `requests=N steps=M`: every
// call of main.request and of main.step it made.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"example.com/survivor/note"
)

var requests, steps atomic.Int64

// request is called once a request, first after its worker woke. It calls note.Add
// (outside package main: not under the wildcard), so it has a frame and its probe sits
// on the PUSH after the stack check (a trap the kernel emulates, cheap beside the
// wake-up's), as a server handler's does.
//
//go:noinline
func request(n *int) { note.Add(n) }

// step is a request's work, called STEPS times in a row: many hits a wake-up, each on
// a PUSH as request's is (it calls note.Mix), so that many fit in the time before the
// budget's first look.
//
//go:noinline
func step(h uint64, i int) uint64 { return note.Mix(h, i) }

// worker makes a request every `every`, from `first` until `stop`.
func worker(first, stop time.Time, every time.Duration, n int) {
	due, mine, h := first, 0, uint64(14695981039346656037)
	for {
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if !time.Now().Before(stop) {
			break
		}
		request(&mine)
		for i := 0; i < n; i++ {
			h = step(h, i)
		}
		steps.Add(int64(n))
		due = due.Add(every)
		if now := time.Now(); now.Sub(due) > every {
			due = now
		}
	}
	requests.Add(int64(mine))
	if h == 0 {
		fmt.Println("h=0")
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: survivor RATE WORKERS STEPS SECS")
	os.Exit(2)
}

func arg(i int) int {
	n, err := strconv.Atoi(os.Args[i])
	if err != nil || n <= 0 {
		usage()
	}
	return n
}

func main() {
	if len(os.Args) != 5 {
		usage()
	}
	rate, workers, n, secs := arg(1), arg(2), arg(3), arg(4)
	every := time.Duration(int64(time.Second) * int64(workers) / int64(rate))
	start := time.Now()
	stop := start.Add(time.Duration(secs) * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			worker(start.Add(every*time.Duration(w)/time.Duration(workers)), stop, every, n)
		}(w)
	}
	wg.Wait()
	fmt.Printf("requests=%d steps=%d\n", requests.Load(), steps.Load())
}
