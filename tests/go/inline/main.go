// inline: small functions the compiler inlines, called after an `if` that has code of
// its own, in branches, in loops (the caller's and their own), after early returns,
// inside a short-circuit condition and inside one another, and after a call that made
// its caller spill the argument to the stack. Each counts its own calls
// (and sums its argument) and the program prints the truth as key=value words, for
// gtrace's entry probes at the inlined calls to be compared with.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var (
	weighCalls, weighSum   int
	noteCalls, noteSum     int
	tickCalls              int
	checkCalls, checkSum   int
	innerCalls, innerSum   int
	outerCalls             int
	belowCalls, sumToCalls int
	scaledCalls, scaledSum int
	spillSink              string
	elapsedTotal           time.Duration
)

// scaled is called from spilled only, after a call: its argument is in the stack slot
// its caller spilled its own parameter to, where DWARF says (DW_OP_call_frame_cfa).
func scaled(x int) int {
	scaledCalls++
	scaledSum += x
	return x * 3
}

// weigh is called from timedWork only: its argument is read there.
func weigh(x int) {
	weighCalls++
	weighSum += x
}

func note(x int) {
	noteCalls++
	noteSum += x
}

func tick() { tickCalls++ }

// check is called from shortCircuit only.
func check(x int) bool {
	checkCalls++
	checkSum += x
	return x%2 == 0
}

func inner(x int) int {
	innerCalls++
	innerSum += x
	return x + 1
}

func outer(x int) int {
	outerCalls++
	return inner(x) * 2
}

// sumTo begins with a loop of its own.
func sumTo(n int) int {
	s := 0
	for k := 0; k < n; k++ {
		s += k
	}
	return s
}

// below is the condition of its caller's loop.
func below(j, n int) bool {
	belowCalls++
	return j < n
}

// timedWork: the compiler puts a reload of i, with weigh's position, on the timed path
// only (the lowest address of weigh's inlined code), and uses an instruction of that
// path as weigh's inline mark.
//
//go:noinline
func timedWork(i int, timed bool) {
	var t0 time.Time
	if timed {
		t0 = time.Now()
	}
	weigh(i)
	if timed {
		elapsedTotal += time.Since(t0)
	}
}

//go:noinline
func branches(i int) {
	if i%3 == 0 {
		note(i)
	} else if i%3 == 1 {
		tick()
	} else {
		note(-i)
		tick()
	}
}

//go:noinline
func loop(i int) {
	for j := 0; j < i%5; j++ {
		note(j)
	}
}

//go:noinline
func early(i int) int {
	if i%7 == 0 {
		return 0
	}
	if i%11 == 0 {
		tick()
		return 1
	}
	note(i)
	return 2
}

//go:noinline
func shortCircuit(i int) bool {
	return i%4 != 0 && check(i)
}

//go:noinline
func nested(i int) int {
	if i%2 == 0 {
		return outer(i)
	}
	return inner(i)
}

//go:noinline
func loops(i int) int {
	total := 0
	for j := 0; below(j, i%4); j++ {
		sumToCalls++
		total += sumTo(j)
	}
	return total
}

//go:noinline
func keep(i int) { spillSink = strconv.Itoa(i) }

//go:noinline
func spilled(i int) int {
	v := i * 7
	keep(v)
	return scaled(i) + v
}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	total := 0
	for i := 0; i < n; i++ {
		timedWork(i, i%10 == 0)
		branches(i)
		loop(i)
		total += early(i)
		if shortCircuit(i) {
			total++
		}
		total += nested(i) + loops(i) + spilled(i)
	}
	fmt.Printf("weigh=%d weigh_sum=%d note=%d note_sum=%d tick=%d check=%d check_sum=%d inner=%d inner_sum=%d outer=%d below=%d sumto=%d scaled=%d scaled_sum=%d total=%d\n",
		weighCalls, weighSum, noteCalls, noteSum, tickCalls, checkCalls, checkSum, innerCalls, innerSum, outerCalls, belowCalls, sumToCalls, scaledCalls, scaledSum, total)
}
