// offcpu blocks in known places for known times and prints what it saw itself, for
// tests/offcpu.rs: each kind of wait (a channel receive, a sync.Mutex, a sleep, a
// select) N times, each wait timed by the program around the blocking operation.
//
//	offcpu N WAIT
//
// waits N times in each place, each wait about WAIT (a Go duration), then prints
// `KIND count=N ns=TOTAL` for each kind: the waits it made and their summed time.
// With a third argument `stdin`, it first prints `ready` and waits for a line on its
// standard input (so that gtrace -p can attach), and after its counts prints `---` and
// waits for its standard input to close.
//
//	offcpu storm DURATION
//
// two goroutines hand a token back and forth over unbuffered channels for DURATION
// (each hand-off parks one of them): a goroutine parking as often as it can, for the
// cost of tracing gopark and --budget. Prints `storm handoffs=N`.
// Each wait really blocks: what it waits for happens only WAIT after it began (another
// goroutine sleeps, then sends or unlocks), and nothing else contends, so each one
// parks the waiting goroutine exactly once.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

type tally struct {
	count int
	ns    int64
}

func (t *tally) add(d time.Duration) {
	t.count++
	t.ns += int64(d)
}

//go:noinline
func waitChan(c chan int) time.Duration {
	start := time.Now()
	<-c
	return time.Since(start)
}

//go:noinline
func waitMutex(m *sync.Mutex) time.Duration {
	start := time.Now()
	m.Lock()
	d := time.Since(start)
	m.Unlock()
	return d
}

//go:noinline
func waitSleep(d time.Duration) time.Duration {
	start := time.Now()
	time.Sleep(d)
	return time.Since(start)
}

//go:noinline
func waitSelect(a, b chan int) time.Duration {
	start := time.Now()
	select {
	case <-a:
	case <-b:
	}
	return time.Since(start)
}

func storm(d time.Duration) {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		ping <- n
		<-pong
	}
	close(ping)
	fmt.Printf("storm handoffs=%d\n", n)
}

func main() {
	if os.Args[1] == "storm" {
		d, err := time.ParseDuration(os.Args[2])
		if err != nil {
			panic(err)
		}
		storm(d)
		return
	}
	n, _ := strconv.Atoi(os.Args[1])
	wait, err := time.ParseDuration(os.Args[2])
	if err != nil {
		panic(err)
	}
	in := bufio.NewScanner(os.Stdin)
	stdin := len(os.Args) > 3 && os.Args[3] == "stdin"
	if stdin {
		fmt.Println("ready")
		in.Scan()
	}
	var ch, sel tally
	var mu, sl tally

	c := make(chan int)
	for i := 0; i < n; i++ {
		go func() {
			time.Sleep(wait)
			c <- 1
		}()
		ch.add(waitChan(c))
	}

	var m sync.Mutex
	for i := 0; i < n; i++ {
		m.Lock()
		go func() {
			time.Sleep(wait)
			m.Unlock()
		}()
		mu.add(waitMutex(&m))
	}

	for i := 0; i < n; i++ {
		sl.add(waitSleep(wait))
	}

	a, b := make(chan int), make(chan int)
	for i := 0; i < n; i++ {
		go func() {
			time.Sleep(wait)
			b <- 1
		}()
		sel.add(waitSelect(a, b))
	}

	fmt.Printf("chan count=%d ns=%d\n", ch.count, ch.ns)
	fmt.Printf("mutex count=%d ns=%d\n", mu.count, mu.ns)
	fmt.Printf("sleep count=%d ns=%d\n", sl.count, sl.ns)
	fmt.Printf("select count=%d ns=%d\n", sel.count, sel.ns)
	if stdin {
		fmt.Println("---")
		for in.Scan() {
		}
	}
}
