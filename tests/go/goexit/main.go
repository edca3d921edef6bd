// goexit: goroutines that end in runtime.Goexit inside a traced call, each followed by
// a new goroutine that the runtime gives the dead one's g (one P: the freed g is the
// next one taken). leaver(n) calls inner(2n), then runtime.Goexit: leaver never returns.
// The next goroutine calls inner(2n+1) from deeper in its stack than leaver was (so
// that leaver's frame, were it left on the g, would look like a call still in flight
// above it, not a stale one below it). It prints its truth: the rounds, and in how many
// the next goroutine had the dead one's g (getg, in assembly), the test's premise.
package main

import (
	"fmt"
	"runtime"
)

//go:noinline
func inner(n int) int { return n * 2 }

// getg is the running goroutine's g (getg_*.s).
func getg() uintptr

// leftG is the g of the last leaver.
var leftG uintptr

//go:noinline
func leaver(n int) {
	leftG = getg()
	inner(2 * n)
	runtime.Goexit()
}

// deeper calls inner(n) from depth levels further down the stack.
//
//go:noinline
func deeper(depth, n int) int {
	var pad [64]int
	pad[depth%64] = n
	if depth == 0 {
		return inner(n)
	}
	return deeper(depth-1, n) + pad[0]
}

func main() {
	runtime.GOMAXPROCS(1)
	rounds, reused := 40, 0
	for r := 0; r < rounds; r++ {
		left := make(chan struct{})
		go func() {
			defer close(left)
			leaver(r)
		}()
		<-left
		fresh := make(chan struct{})
		go func() {
			if getg() == leftG {
				reused++
			}
			deeper(8, 2*r+1)
			close(fresh)
		}()
		<-fresh
	}
	fmt.Printf("truth: rounds=%d reused=%d\n", rounds, reused)
}
