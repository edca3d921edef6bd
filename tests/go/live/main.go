// live calls main.work at a steady pace for tests/live.rs, which watches gtrace --live
// redraw its counts:
//
//	live N PERIOD
//
// prints `ready` and waits for a line on its standard input (so that gtrace -p can
// attach), then calls main.work N times, one call every PERIOD, each call of kind i%3
// sleeping i%3 milliseconds; then prints `calls=N` and its calls of each kind
// (`kind0=...`), and `---`, and waits for its standard input to close.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func work(kind int) {
	time.Sleep(time.Duration(kind) * time.Millisecond)
}

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	period, err := time.ParseDuration(os.Args[2])
	if err != nil {
		panic(err)
	}
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	in.Scan()
	var kinds [3]int
	next := time.Now()
	for i := 0; i < n; i++ {
		work(i % 3)
		kinds[i%3]++
		next = next.Add(period)
		time.Sleep(time.Until(next))
	}
	fmt.Printf("calls=%d kind0=%d kind1=%d kind2=%d\n", n, kinds[0], kinds[1], kinds[2])
	fmt.Println("---")
	for in.Scan() {
	}
}
