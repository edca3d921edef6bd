// gomapbench builds one Go map (integer or string keys, SIZE entries) and looks keys up
// in it CALLS times through a //go:noinline function that gtrace probes with m[k]:
// every other key present, the others absent. Usage: gomapbench int|str SIZE CALLS.
package main

import (
	"fmt"
	"os"
	"strconv"
)

//go:noinline
func lookupInt(m map[int]int, k int) int {
	return m[k]
}

//go:noinline
func lookupStr(m map[string]int, k string) int {
	return m[k]
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gomapbench int|str SIZE CALLS")
		os.Exit(2)
	}
	size, _ := strconv.Atoi(os.Args[2])
	calls, _ := strconv.Atoi(os.Args[3])
	sum := 0
	if os.Args[1] == "int" {
		m := make(map[int]int, size)
		for i := 0; i < size; i++ {
			m[i*7] = i + 1
		}
		for i := 0; i < calls; i++ {
			// Present (a multiple of 7) or absent (one more).
			sum += lookupInt(m, (i%size)*7+i%2)
		}
	} else {
		m := make(map[string]int, size)
		keys := make([]string, 0, 2*size)
		for i := 0; i < size; i++ {
			k := "request-path-" + strconv.Itoa(i)
			m[k] = i + 1
			keys = append(keys, k, k+"-absent")
		}
		for i := 0; i < calls; i++ {
			sum += lookupStr(m, keys[(2*(i%size)+i%2)%len(keys)])
		}
	}
	fmt.Println("sum", sum)
}
