// The benchmark's target: a hot function called in a loop, timed by the program itself.
//
//	benchtarget bench N   prints "ready", calls hot N times, prints "ns/call X calls N sum S"
//	benchtarget wait      prints "ready", then sleeps until killed
//	benchtarget phases S  prints "ready", calls hot for S seconds, then a line per 10 ms
//	                      of it: "window T_MS NS_PER_CALL CALLS CPU_NS" (the process's CPU
//	                      time, user and system, in that window: for the budget's breaker)
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// hot is the traced function: cheap, not inlined, with two RETs.
//
//go:noinline
func hot(n int) int {
	if n%7 == 0 {
		return n / 7
	}
	return n*3 + 1
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtarget bench N | wait")
		os.Exit(2)
	}
	fmt.Println("ready")
	switch os.Args[1] {
	case "phases":
		phases(os.Args[2])
	case "wait":
		for {
			time.Sleep(time.Hour)
		}
	case "bench":
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		start := time.Now()
		s := 0
		for i := 0; i < n; i++ {
			s += hot(i)
		}
		elapsed := time.Since(start)
		fmt.Printf("ns/call %.1f calls %d sum %d\n", float64(elapsed.Nanoseconds())/float64(n), n, s)
	}
}

// phases calls hot for the given number of seconds, timing every 10 ms window of calls
// (the clock is read every 100 calls), and prints the windows at the end.
func phases(seconds string) {
	secs, err := strconv.Atoi(seconds)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	type window struct {
		at    time.Duration
		ns    float64
		calls int
		cpu   int64
	}
	cpu := func() int64 {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	var windows []window
	start := time.Now()
	windowStart, calls, s, i, windowCPU := start, 0, 0, 0, cpu()
	for {
		for k := 0; k < 100; k++ {
			s += hot(i)
			i++
		}
		calls += 100
		now := time.Now()
		if d := now.Sub(windowStart); d >= 10*time.Millisecond {
			c := cpu()
			windows = append(windows, window{windowStart.Sub(start), float64(d.Nanoseconds()) / float64(calls), calls, c - windowCPU})
			windowStart, calls, windowCPU = now, 0, c
			if now.Sub(start) >= time.Duration(secs)*time.Second {
				break
			}
		}
	}
	for _, w := range windows {
		fmt.Printf("window %.1f %.2f %d %d\n", float64(w.at.Microseconds())/1000, w.ns, w.calls, w.cpu)
	}
	fmt.Printf("calls %d sum %d\n", i, s)
}
