// kinds: the Go program built every way gtrace must handle (stripped or not, PIE or not,
// cgo or not, every Go version since 1.17) and traced with the same script. Each mode
// calls known functions a known number of times and prints its own truth as `key=value`
// words.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

//go:noinline
func add(a, b int) int { return a + b }

//go:noinline
func sleepy(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

// triple is small enough that the compiler inlines it into its three callers.
func triple(x int) int {
	if x < 0 {
		return 0
	}
	return 3*x + 1
}

//go:noinline
func callerA(i int) int { return triple(i) + 1 }

//go:noinline
func callerB(i int) int { return triple(i+1) * 2 }

//go:noinline
func callerC(i int) int { return triple(i+2) - 1 }

// cAdd is set by cgo.go when the program is built with cgo: it calls a C function.
var cAdd func(a, b int) int

// goid is the current goroutine's id, from the first line of runtime.Stack.
func goid() int {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	field := strings.Fields(string(buf[:n]))[1]
	id, err := strconv.Atoi(field)
	if err != nil {
		panic(err)
	}
	return id
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func main() {
	mode := os.Args[1]
	n := atoi(os.Args[2])
	if mode == "all" {
		// Every mode, each n times, one truth line each.
		for _, m := range []string{"add", "sleep", "inline"} {
			run(m, n)
		}
		return
	}
	run(mode, n)
}

func run(mode string, n int) {
	switch mode {
	case "add":
		// Calls add n times from a fresh goroutine, whose id it prints.
		done := make(chan int)
		go func() {
			id := goid()
			for i := 0; i < n; i++ {
				add(i, 1)
			}
			done <- id
		}()
		id := <-done
		cgo := 0
		if cAdd != nil {
			for i := 0; i < n; i++ {
				cgo += cAdd(i, 1)
			}
		}
		fmt.Printf("calls=%d sum_a=%d goid=%d cgo=%d\n", n, n*(n-1)/2, id, cgo)
	case "sleep":
		for i := 0; i < n; i++ {
			sleepy(1)
		}
		fmt.Printf("sleeps=%d\n", n)
	case "inline":
		s := 0
		for i := 0; i < n; i++ {
			s += callerA(i) + callerB(i) + callerC(i)
		}
		fmt.Printf("inlined=%d sum=%d\n", 3*n, s)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
}
