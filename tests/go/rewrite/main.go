// rewrite: the program tests/inplace.rs writes over itself. Built plain it is the build
// traced first; built with -tags newer (newer.go) the same functions sit at other
// offsets behind more code, as a new build copied over the old one in place would.
// Each run calls work 100 times and prints its truth: the build and the sum of work's
// results (which the newer build computes differently).
package main

import (
	"fmt"
	"strconv"
)

//go:noinline
func work(i int) int { return extra(i) + len(strconv.Itoa(i)) }

func main() {
	calls, sum := 0, 0
	for i := 0; i < 100; i++ {
		sum += work(i)
		calls++
	}
	fmt.Printf("truth: build=%s calls=%d sum=%d\n", build, calls, sum)
}
