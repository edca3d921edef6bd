// libs: a Go program for the stdlib libraries' end-to-end tests. Each mode does a
// known amount of one kind of work and prints its own truth as `key=value` lines, for
// the tests to compare with what gtrace saw.
//
//	libs gc N        runtime.GC() N times
//	libs spawn N     N goroutines started (by main.spawn) and waited for
//	libs lock N      N goroutines fighting over one sync.Mutex, each holding it 1ms
//	libs tick N      main.tick called every 10ms, N times (for `on interval`)
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"
)

//go:noinline
func tick(i int) int { return i * 2 }

//go:noinline
func work(i int, wg *sync.WaitGroup) {
	defer wg.Done()
	_ = tick(i)
}

//go:noinline
func spawn(n int) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go work(i, &wg)
	}
	wg.Wait()
}

func contend(n int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			mu.Lock()
			time.Sleep(time.Millisecond)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
}

// The runtime's own count of goroutines created since the program started (every call
// of runtime.newproc1), or -1 before Go 1.26, which added the metric.
func goroutinesCreated() int64 {
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	return int64(sample[0].Value.Uint64())
}

// What the gc mode keeps live.
var kept [][]byte

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: libs gc|spawn|lock|tick N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Give the tracer's begin probes a moment; the work is what is measured.
	switch os.Args[1] {
	case "gc":
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		// A heap worth measuring: 4 MB kept live through every cycle.
		for i := 0; i < 64; i++ {
			kept = append(kept, make([]byte, 64<<10))
		}
		for i := 0; i < n; i++ {
			runtime.GC()
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		fmt.Printf("forced=%d\nnumgc=%d\nheapalloc=%d\n", n, after.NumGC-before.NumGC, after.HeapAlloc)
	case "spawn":
		spawn(n)
		fmt.Printf("spawned=%d\ncreated=%d\n", n, goroutinesCreated())
	case "lock":
		contend(n)
		fmt.Printf("contenders=%d\n", n)
	case "tick":
		for i := 0; i < n; i++ {
			tick(i)
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Printf("ticks=%d\n", n)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
