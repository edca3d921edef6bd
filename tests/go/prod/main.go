// prod: what gtrace must count exactly when it runs on a production server: maps
// filled past their size, goroutines alive by the hundred thousand, printed events
// past a rate limit or a ring buffer, and a hot function traced beside a cold one. Each
// mode prints its own truth as `key=value` words for tests/production.rs.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:noinline
func record(k int) int { return k + 1 }

//go:noinline
func setter(v int) int { return v }

//go:noinline
func getter(v int) int { return v }

//go:noinline
func emit(i int, s string) int { return i + len(s) }

//go:noinline
func hot(n int) int {
	if n%7 == 0 {
		return n / 7
	}
	return n*3 + 1
}

//go:noinline
func cold(n int) int { return n * 2 }

// cpuNs is what every thread of this process has spent on a CPU so far, by the
// kernel's scheduler accounting (the first field of each task's schedstat).
func cpuNs() int64 {
	tasks, _ := os.ReadDir("/proc/self/task")
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		total += n
	}
	return total
}

func arg(i int) int {
	n, err := strconv.Atoi(os.Args[i])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return n
}

func main() {
	switch os.Args[1] {
	case "keys":
		// record(k) for N distinct keys.
		n := arg(2)
		s := 0
		for k := 0; k < n; k++ {
			s += record(k)
		}
		fmt.Printf("calls=%d sum=%d\n", n, s)
	case "spread":
		// record(k) for N distinct keys, R rounds, from G goroutines at once (key k on
		// goroutine k mod G): every new key arrives in a burst on each CPU.
		n, rounds, g := arg(2), arg(3), arg(4)
		var wg sync.WaitGroup
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func(first int) {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					for k := first; k < n; k += g {
						record(k)
					}
				}
			}(i)
		}
		wg.Wait()
		fmt.Printf("keys=%d calls=%d\n", n, n*rounds)
	case "pairs":
		// G goroutines at once, each N times: setter(id) then getter(id), id its own
		// (1 to G): one key's set and take on one goroutine, others' at once beside.
		g, n := arg(2), arg(3)
		var wg sync.WaitGroup
		for i := 0; i < g; i++ {
			wg.Add(1)
			go func(id int) {
				defer wg.Done()
				for r := 0; r < n; r++ {
					setter(id)
					getter(id)
				}
			}(i + 1)
		}
		wg.Wait()
		fmt.Printf("calls=%d\n", g*n)
	case "alive":
		// N goroutines alive at once: each calls setter, waits until all have, then
		// calls getter with the same value.
		n := arg(2)
		var set, done sync.WaitGroup
		release := make(chan struct{})
		set.Add(n)
		done.Add(n)
		for i := 0; i < n; i++ {
			go func(v int) {
				defer done.Done()
				setter(v)
				set.Done()
				<-release
				getter(v)
			}(i)
		}
		set.Wait()
		close(release)
		done.Wait()
		fmt.Printf("calls=%d\n", n)
	case "print":
		// emit(i, s) N times in a loop, s as long as the third argument says; then the
		// file the fourth names, if any, is created (before the truth is printed: a
		// stdout nobody reads may block that).
		n, size := arg(2), arg(3)
		s := strings.Repeat("x", size)
		for i := 0; i < n; i++ {
			emit(i, s)
		}
		if len(os.Args) > 4 {
			if err := os.WriteFile(os.Args[4], nil, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		fmt.Printf("calls=%d\n", n)
	case "paced":
		// emit(i, "") N times, one every MS milliseconds.
		n, ms := arg(2), arg(3)
		start := time.Now()
		for i := 0; i < n; i++ {
			emit(i, "")
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		fmt.Printf("calls=%d elapsed_ms=%d\n", n, time.Since(start).Milliseconds())
	case "hotcold":
		// hot N times; every K-th call also cold, and cold once more every 10ms of wall
		// time, so that cold calls go on while gtrace reacts.
		n, k := arg(2), arg(3)
		hots, colds, s := 0, 0, 0
		last := time.Now()
		for i := 0; i < n; i++ {
			s += hot(i)
			hots++
			if i%k == 0 || time.Since(last) > 10*time.Millisecond {
				s += cold(i)
				colds++
				last = time.Now()
			}
		}
		fmt.Printf("hot_calls=%d cold_calls=%d sum=%d\n", hots, colds, s)
	case "cpu":
		// hot K times every millisecond until stdin closes (a server under a steady
		// load), and every 100 ms one line: the wall clock, the calls so far and the CPU
		// time all threads have spent, by their own accounting (schedstat, ns).
		k := arg(2)
		go func() {
			var b [1]byte
			os.Stdin.Read(b[:])
			os.Exit(0)
		}()
		calls, s := 0, 0
		tick, next := time.NewTicker(time.Millisecond), time.Now()
		for range tick.C {
			for i := 0; i < k; i++ {
				s += hot(i)
			}
			calls += k
			if time.Now().After(next) {
				fmt.Printf("at_ns=%d calls=%d cpu_ns=%d sum=%d\n", time.Now().UnixNano(), calls, cpuNs(), s)
				next = next.Add(100 * time.Millisecond)
			}
		}
	case "cold":
		// cold N times in a loop, on each of G goroutines (1 if not given).
		n, g := arg(2), 1
		if len(os.Args) > 3 {
			g = arg(3)
		}
		sums := make([]int, g)
		var wg sync.WaitGroup
		for j := 0; j < g; j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				for i := 0; i < n; i++ {
					sums[j] += cold(i)
				}
			}(j)
		}
		wg.Wait()
		s := 0
		for _, v := range sums {
			s += v
		}
		fmt.Printf("cold_calls=%d sum=%d\n", n*g, s)
	default:
		fmt.Fprintln(os.Stderr, "usage: prod keys N | alive N | print N SIZE | paced N MS | hotcold N K | cpu K | cold N [G]")
		os.Exit(2)
	}
}
