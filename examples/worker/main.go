// worker: a small Go program for trying gtrace. It calls doWork a known number of
// times with known sizes, and prints its own totals so gtrace's answer can be checked.
package main

import (
	"flag"
	"fmt"
	"time"
)

type Counter struct{ total int }

//go:noinline
func (c *Counter) Add(delta int) { c.total += delta }

//go:noinline
func doWork(n int) int {
	time.Sleep(time.Duration(n) * time.Millisecond)
	return n * 2
}

func main() {
	calls := flag.Int("calls", 50, "how many calls of doWork")
	flag.Parse()
	c := &Counter{}
	sum := 0
	for i := 0; i < *calls; i++ {
		n := i%10 + 1
		sum += n
		c.Add(doWork(n))
	}
	fmt.Printf("worker: %d calls of main.doWork, sum of n = %d, total = %d\n", *calls, sum, c.total)
}
