// carry: functions whose parameters a return probe reads, which gtrace reads at the entry
// of each call and carries to its return: a recursive function (every level of the
// recursion is its own call), and a function called on many goroutines at once that
// sleeps and yields inside, so that a call often returns on another thread than the one
// it started on (the program counts how often, from the thread ids). Parameters of every
// place the register ABI gives: integers, a string, a pointer, a struct in registers and
// a struct on the stack. The program prints its own truth as key=value words.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

type point struct{ X, Y int }

// big holds an array, so the register ABI passes it on the stack.
type big struct {
	A [2]int
	B int
}

var (
	mu                            sync.Mutex
	fibCalls, fibSum              int
	fibByN                        = map[int]int{}
	hopCalls, hopIDSum, hopPXSum  int
	hopPtYSum, hopBigBSum, labels int
	byLabel                       = map[string]int{}
	migrated                      int
)

//go:noinline
func fib(n int) int {
	mu.Lock()
	fibCalls++
	fibSum += n
	fibByN[n]++
	mu.Unlock()
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

//go:noinline
func hop(id int, label string, p *point, pt point, bg big) int {
	before := syscall.Gettid()
	for i := 0; i < 3; i++ {
		runtime.Gosched()
		time.Sleep(20 * time.Microsecond)
	}
	after := syscall.Gettid()
	mu.Lock()
	hopCalls++
	hopIDSum += id
	hopPXSum += p.X
	hopPtYSum += pt.Y
	hopBigBSum += bg.B
	labels += len(label)
	byLabel[label]++
	if before != after {
		migrated++
	}
	mu.Unlock()
	// Overwrite what the registers held, so a read at the return that is not carried
	// sees other values.
	id, p, label = -1, nil, ""
	return id + bg.A[1]
}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	total := 0
	for i := 0; i < n; i++ {
		total += fib(i % 12)
	}
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < n/10+1; i++ {
				id := g*1000 + i
				hop(id, "l"+strconv.Itoa(id%3), &point{X: id % 7, Y: 1}, point{X: 2, Y: id % 5}, big{A: [2]int{1, 2}, B: id % 11})
			}
		}(g)
	}
	wg.Wait()
	fmt.Printf("fib_calls=%d fib_sum=%d hop_calls=%d hop_id_sum=%d hop_px_sum=%d hop_pty_sum=%d hop_bigb_sum=%d labels=%d migrated=%d total=%d\n",
		fibCalls, fibSum, hopCalls, hopIDSum, hopPXSum, hopPtYSum, hopBigBSum, labels, migrated, total)
	for k := 0; k < 12; k++ {
		fmt.Printf("fib_n%d=%d ", k, fibByN[k])
	}
	for _, l := range []string{"l0", "l1", "l2"} {
		fmt.Printf("label_%s=%d ", l, byLabel[l])
	}
	fmt.Println()
}
