// profile: the Go program the tests of --pprof, --flamegraph and -f folded trace. It
// calls main.leaf through distinct call paths a known number of times (main.viaA,
// main.viaB, and main.inlined, which the compiler inlines into main.main), and records
// its own truth with the runtime's own unwinder: each call's stack (root first, from
// main.main on, inlined frames expanded as runtime.CallersFrames gives them, with each
// frame's file and line), how many of its calls had an even argument, and how long
// each call's body took. It prints
//
//	stack main.main@/path/main.go:96;main.viaA@/path/main.go:70;main.leaf@... calls=3 even=2 ns=6012345
//
// on standard error per distinct stack, then `calls=TOTAL` (standard output stays for
// gtrace's -f folded).
//
// Usage: profile A B C SLEEP_US: A calls through viaA, B through viaB, C through inlined;
// each call of leaf sleeps SLEEP_US microseconds.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

type truth struct {
	calls int
	even  int
	ns    int64
}

var (
	seen  = map[string]*truth{}
	sleep time.Duration
)

// leaf records the stack it was called from and how long its body took.
//
//go:noinline
func leaf(n int) int {
	start := time.Now()
	pcs := make([]uintptr, 64)
	// Skip runtime.Callers itself: the stack starts at main.leaf.
	got := runtime.Callers(1, pcs)
	frames := runtime.CallersFrames(pcs[:got])
	var names []string
	for {
		f, more := frames.Next()
		names = append(names, fmt.Sprintf("%s@%s:%d", f.Function, f.File, f.Line))
		if f.Function == "main.main" || !more {
			break
		}
	}
	// Root first, as folded stacks are.
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	key := strings.Join(names, ";")
	time.Sleep(sleep)
	t := seen[key]
	if t == nil {
		t = &truth{}
		seen[key] = t
	}
	t.calls++
	if n%2 == 0 {
		t.even++
	}
	t.ns += time.Since(start).Nanoseconds()
	return n * 2
}

//go:noinline
func viaA(n int) int { return leaf(n) + 1 }

//go:noinline
func viaB(n int) int { return leaf(n) + 2 }

// inlined is small enough to be inlined into main.main: its frame is an inlined one.
func inlined(n int) int { return leaf(n) + 3 }

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: profile A B C SLEEP_US")
		os.Exit(2)
	}
	return n
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: profile A B C SLEEP_US")
		os.Exit(2)
	}
	a, b, c := atoi(os.Args[1]), atoi(os.Args[2]), atoi(os.Args[3])
	sleep = time.Duration(atoi(os.Args[4])) * time.Microsecond
	sum := 0
	for i := 0; i < a; i++ {
		sum += viaA(i)
	}
	for i := 0; i < b; i++ {
		sum += viaB(i)
	}
	for i := 0; i < c; i++ {
		sum += inlined(i)
	}
	keys := make([]string, 0, len(seen))
	total := 0
	for k, t := range seen {
		keys = append(keys, k)
		total += t.calls
	}
	sort.Strings(keys)
	for _, k := range keys {
		t := seen[k]
		fmt.Fprintf(os.Stderr, "stack %s calls=%d even=%d ns=%d\n", k, t.calls, t.even, t.ns)
	}
	fmt.Fprintf(os.Stderr, "calls=%d sum=%d\n", total, sum)
}
