// duty: requests at a steady rate on a few workers, each request a call of main.begin
// and one of main.end with the same key, its worker's request record (reused from one
// request to the next, as Go reuses a finished request's address), waiting meanwhile
// (time.Sleep, as a request waits on I/O): the truth for tests/duty.rs, which traces
// the pair under a budget low enough that gtrace duty-cycles it.
//
//	duty run SECS RATE WORKERS   the requests at once, then its count
//	duty hold SECS RATE WORKERS  prints "ready", waits for a line on stdin, runs, says
//	                             its count, and waits for stdin to close
//
// It prints `requests=N` (every request it made) and `slowest_ns=M` (the longest, from
// before its call of begin to after end returned: what gtrace measures from begin's
// entry to end's lies within it).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

type request struct {
	id   int
	seen int
}

// begin and end call note, so each has a frame and its probe sits on the PUSH after
// the stack check (a trap the kernel emulates), as a server's handler's does.
//
//go:noinline
func begin(r *request) { note(&r.id) }

//go:noinline
func end(r *request) { note(&r.seen) }

//go:noinline
func note(n *int) { *n++ }

// worker makes `rate` requests a second for `secs`, each waiting `wait` between begin
// and end: its count and its slowest.
func worker(secs, rate int, wait time.Duration) (int, time.Duration) {
	r := &request{}
	start := time.Now()
	stop := start.Add(time.Duration(secs) * time.Second)
	n, slowest := 0, time.Duration(0)
	for {
		now := time.Now()
		if !now.Before(stop) {
			return n, slowest
		}
		due := int(now.Sub(start).Seconds() * float64(rate))
		if n >= due {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		t := time.Now()
		begin(r)
		time.Sleep(wait)
		end(r)
		if d := time.Since(t); d > slowest {
			slowest = d
		}
		n++
	}
}

func run(secs, rate, workers int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	total, slowest := 0, time.Duration(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, s := worker(secs, rate/workers, 50*time.Microsecond)
			mu.Lock()
			total += n
			if s > slowest {
				slowest = s
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("requests=%d\nslowest_ns=%d\n", total, slowest.Nanoseconds())
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: duty run|hold SECS RATE WORKERS")
		os.Exit(2)
	}
	secs, _ := strconv.Atoi(os.Args[2])
	rate, _ := strconv.Atoi(os.Args[3])
	workers, _ := strconv.Atoi(os.Args[4])
	in := bufio.NewScanner(os.Stdin)
	if os.Args[1] == "hold" {
		fmt.Println("ready")
		in.Scan()
	}
	run(secs, rate, workers)
	if os.Args[1] == "hold" {
		for in.Scan() {
		}
	}
}
