// stress: the target of tests/vm's preemption stress. It prints "ready", waits for a line
// on stdin (while gtrace attaches), then runs WORKERS goroutines for SECONDS, each
// calling step in a loop with arguments whose relation gtrace's events must keep
// (chk = id*1000003 + i, m[id] = id*7, tag = "w<id>"), ev true every 256th call, and
// prints its own truth: each worker's calls, the total, and how many calls had ev true
// (those gtrace prints).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

const every = 256

//go:noinline
func step(id int, i int, chk int, m map[int]int, tag string, ev bool) int {
	if m[id] != id*7 || len(tag) == 0 {
		panic("stress: bad arguments")
	}
	return chk
}

func main() {
	seconds, _ := strconv.Atoi(os.Args[1])
	workers, _ := strconv.Atoi(os.Args[2])
	m := map[int]int{}
	for id := 0; id < workers; id++ {
		m[id] = id * 7
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	calls := make([]int, workers)
	var wg sync.WaitGroup
	for id := 0; id < workers; id++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			tag := fmt.Sprintf("w%d", id)
			for i := 0; ; i++ {
				if i%1024 == 0 && time.Now().After(deadline) {
					calls[id] = i
					return
				}
				if step(id, i, id*1000003+i, m, tag, i%every == 0) != id*1000003+i {
					panic("stress: bad result")
				}
			}
		}(id)
	}
	wg.Wait()
	total, events := 0, 0
	for id, n := range calls {
		fmt.Printf("worker=%d calls=%d\n", id, n)
		total += n
		events += (n + every - 1) / every
	}
	fmt.Printf("total=%d events=%d\n", total, events)
}
