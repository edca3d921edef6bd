// export: a program with known counts for gtrace's export tests (--prometheus, --otlp).
// It prints "ready", waits for a line on stdin (so the test can attach first), calls
// handle with known methods, paths and sizes and work with known sleeps, prints its
// own truth, then waits until stdin is closed (so the exporters can be read).
package main

import (
	"bufio"
	"fmt"
	"math/bits"
	"os"
	"sort"
	"strings"
	"time"
)

//go:noinline
func handle(method, path string, size int) int { return size * 2 }

//go:noinline
func work(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

func main() {
	in := bufio.NewReader(os.Stdin)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	if _, err := in.ReadString('\n'); err != nil {
		return
	}
	methods := []string{"GET", "GET", "POST"}
	paths := []string{"/a", "/b", "/c", "/a\"b\\c"}
	requests := map[string]int{}
	var sizes []int
	sum, big := 0, 0
	for i := 0; i < 300; i++ {
		m, p := methods[i%len(methods)], paths[(i/3)%len(paths)]
		size := (i*37)%1000 + 1
		handle(m, p, size)
		requests[m+" "+p]++
		sizes = append(sizes, size)
		sum += size
		if size > 950 {
			big++
			fmt.Printf("truth-line: big %s %s %d\n", m, p, size)
		}
	}
	slept := 0
	for i := 0; i < 10; i++ {
		work(i%4 + 1)
		slept += i%4 + 1
	}
	sort.Ints(sizes)
	// How many sizes fall in each power-of-two bucket [2^(k-1), 2^k), by k.
	buckets := map[int]int{}
	for _, s := range sizes {
		buckets[bits.Len(uint(s))]++
	}
	for k := 0; k <= 64; k++ {
		if buckets[k] > 0 {
			fmt.Printf("truth-bucket: %d %d\n", k, buckets[k])
		}
	}
	var keys []string
	for k := range requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("truth-request: %s %d\n", k, requests[k])
	}
	// The median as Prometheus ranks it: the value at rank ceil(n/2).
	fmt.Printf("truth: requests=%d size_sum=%d size_median=%d size_min=%d size_max=%d big=%d work=10 slept_ms=%d\n",
		len(sizes), sum, sizes[(len(sizes)+1)/2-1], sizes[0], sizes[len(sizes)-1], big, slept)
	fmt.Println(strings.Repeat("-", 3))
	os.Stdout.Sync()
	for {
		if _, err := in.ReadString('\n'); err != nil {
			return
		}
	}
}
