// sharedg: one of two processes of one binary traced at once with -b. Built with its heap
// at a fixed address (Go before 1.26, or GOEXPERIMENT=norandomizedheapbase64), two of
// them make their goroutines at the same addresses (g's). Usage: sharedg GOROUTINES
// CALLS MS. It makes GOROUTINES goroutines, prints each one's g (`g=0x...`) and
// `ready`, waits for a line on stdin, then each goroutine calls nap(MS) CALLS times, and
// it prints `calls=N ms=MS` for tests/goroutines.rs.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// getg is in getg_*.s: the running goroutine's g.
func getg() uintptr

//go:noinline
func nap(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	calls, _ := strconv.Atoi(os.Args[2])
	ms, _ := strconv.Atoi(os.Args[3])
	gs := make([]uintptr, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer done.Done()
			gs[i] = getg()
			ready.Done()
			<-start
			for c := 0; c < calls; c++ {
				nap(ms)
			}
		}(i)
	}
	ready.Wait()
	for _, g := range gs {
		fmt.Printf("g=%#x\n", g)
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	close(start)
	done.Wait()
	fmt.Printf("calls=%d ms=%d\n", n*calls, ms)
}
