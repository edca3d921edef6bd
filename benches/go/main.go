// The benchmark's target: a hot function called in a loop, timed by the program itself.
//
//	benchtarget bench N   prints "ready", calls hot N times, prints "ns/call X calls N sum S"
//	benchtarget wait      prints "ready", then sleeps until killed
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// hot is the traced function: cheap, not inlined, with two RETs.
//
//go:noinline
func hot(n int) int {
	if n%7 == 0 {
		return n / 7
	}
	return n*3 + 1
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtarget bench N | wait")
		os.Exit(2)
	}
	fmt.Println("ready")
	switch os.Args[1] {
	case "wait":
		for {
			time.Sleep(time.Hour)
		}
	case "bench":
		n, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		start := time.Now()
		s := 0
		for i := 0; i < n; i++ {
			s += hot(i)
		}
		elapsed := time.Since(start)
		fmt.Printf("ns/call %.1f calls %d sum %d\n", float64(elapsed.Nanoseconds())/float64(n), n, s)
	}
}
