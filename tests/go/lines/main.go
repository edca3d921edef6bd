// lines: source lines for `on line` probes, each marked with a comment `// L:name` that
// tests/lines.rs finds (so the line numbers can move). Loops whose header, body and the
// statement after them each have a count the program knows; a closure; a function the
// compiler inlines at two places; locals in registers and in stack slots; a local dead
// at its line (optimized away there). The program prints its own truth as key=value
// words: how often each marked line runs, and the sums of the values read there.
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
)

type point struct {
	X, Y int
	Name string
}

var (
	sink       string
	scaledHits int
)

//go:noinline
func keep(s string) { sink = s }

//go:noinline
func keepInt(v int) { sink = strconv.Itoa(v) }

// counted loops: the header runs once as the loop starts and once per iteration (its
// post statement and condition), the body once per iteration, the line after once.
//
//go:noinline
func loop(n int) int {
	total := 0
	for i := 0; i < n; i++ { // L:header
		total += i * 2 // L:body
	}
	return total + n // L:after
}

//go:noinline
func ranged(xs []int) int {
	s := 0
	for _, x := range xs { // L:range
		s += x // L:rangebody
	}
	keepInt(s) // L:rangeafter
	return s
}

// spillAfter: the line after its loop has instructions inside the loop (a reload the
// register allocator gives it), which must not count as runs of the line.
//
//go:noinline
func spillAfter(xs []int, k int) int {
	s := 0
	for _, x := range xs {
		s += x
		keepInt(x)
	}
	return s * k // L:spillafter
}

// stacked keeps p across calls, so at its marked line p lives in stack slots.
//
//go:noinline
func stacked(n, m int, name string) int {
	p := point{X: n, Y: m, Name: name}
	keep(p.Name)
	q := p.X + p.Y // L:stacked
	keep(name)
	keepInt(p.X)
	return q
}

// gone: k is dead after its last use, so at the marked line no place holds it.
//
//go:noinline
func gone(n int) int {
	k := n * n
	keepInt(k)
	m := n + 1 // L:gone
	keepInt(m)
	return m
}

// scaled is inlined into both callers below: its marked line has two copies, one in
// each.
func scaled(x int) int {
	keepInt(x) // L:inlined
	return x*5 + 1
}

//go:noinline
func viaA(n int) int { return scaled(n) }

//go:noinline
func viaB(n int) int { return scaled(n) * 2 }

//go:noinline
func closure(n int) int {
	acc := 0
	add := func(v int) {
		acc += v // L:closure
	}
	for i := 0; i < n; i++ {
		add(i)
	}
	return acc
}

// A comparison with an interface value, which the compiler splits around a spill for
// the line before (the type words, then runtime.ifaceeq): one run of the line, however
// many parts its code has.
type rows struct{ n, max int }

//go:noinline
func (r *rows) next() ([]interface{}, error) {
	if r.n >= r.max {
		return nil, io.EOF
	}
	r.n++
	return []interface{}{r.n}, nil
}

//go:noinline
func drain(r *rows, out chan<- []interface{}) error {
	for {
		row, err := r.next()
		if err == io.EOF { // L:ifaceeq
			return nil
		}
		if err != nil {
			return err
		}
		out <- row
	}
}

var kept *int

//go:noinline
func keepPtr(p *int) { kept = p }

// escapes: total's address outlives the call, so the compiler moves it to the heap and
// DWARF names the variable that holds its address `&total`.
//
//go:noinline
func escapes(n int) int {
	total := n * 3
	keepPtr(&total)
	total++
	return total // L:escaped
}

type tag struct{ Key, Value string }

type request struct{ Tags []tag }

type labels struct {
	keys []string
	size int
}

// add has an early return, and is inlined into nested's inner loop: the loop's closing
// jump gets the line of the call (Go's line table), which must not count it twice.
func (l *labels) add(k, v string) {
	if k == "" {
		return
	}
	l.keys = append(l.keys[:0], k)
	l.size += len(v)
}

//go:noinline
func nested(rs []request, l *labels) int {
	for i := range rs {
		r := &rs[i]
		for j := range r.Tags {
			t := &r.Tags[j]
			l.add(t.Key, t.Value) // L:nestedadd
		}
	}
	return l.size
}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	var loops, iters, iterSum, loopTotals, ranges, rangeIters, rangeSum, spillK int
	var stackedX, stackedY, stackedNames, stackedNameLen int
	var goneCalls, inlinedCalls, inlinedXSum, closureCalls, closureSum, ifaceeqRuns, nestedAdds int
	var lbl labels
	var escapedSum int
	total := 0
	for c := 0; c < n; c++ {
		k := c % 7
		r := loop(k)
		total += r
		loopTotals += r - k
		loops++
		iters += k
		for i := 0; i < k; i++ {
			iterSum += i
		}
		xs := make([]int, c%5)
		for i := range xs {
			xs[i] = i + c
			rangeSum += xs[i]
		}
		total += ranged(xs)
		ranges++
		rangeIters += len(xs)
		total += spillAfter(xs, c%4)
		spillK += c % 4
		name := "s" + strconv.Itoa(c%3)
		total += stacked(c, 2*c, name)
		stackedNameLen += len(name)
		stackedX += c
		stackedY += 2 * c
		if c%3 == 1 {
			stackedNames++
		}
		total += gone(c)
		goneCalls++
		total += viaA(c) + viaB(c)
		inlinedCalls += 2
		inlinedXSum += c + c
		total += closure(k)
		closureCalls += k
		closureSum += k * (k - 1) / 2
		reqs := make([]request, c%3+1)
		for i := range reqs {
			for j := 0; j < (c+i)%4; j++ {
				reqs[i].Tags = append(reqs[i].Tags, tag{Key: "k" + strconv.Itoa(j%2), Value: "v"})
			}
			nestedAdds += len(reqs[i].Tags)
		}
		total += nested(reqs, &lbl)
		escapedSum += escapes(c)
		out := make(chan []interface{}, 4)
		if drain(&rows{max: c % 4}, out) == nil {
			ifaceeqRuns += c%4 + 1
		}
	}
	fmt.Printf("header=%d body=%d body_i_sum=%d after=%d after_n_sum=%d after_total_sum=%d range=%d rangebody=%d rangebody_x_sum=%d rangeafter=%d spillafter=%d spillafter_k_sum=%d spillafter_s_sum=%d stacked=%d stacked_x=%d stacked_y=%d stacked_s1=%d gone=%d inlined=%d inlined_x_sum=%d closure=%d closure_v_sum=%d ifaceeq=%d nestedadd=%d escaped_total_sum=%d stacked_name_len=%d total=%d\n",
		loops+iters, iters, iterSum, loops, iters, loopTotals, ranges+rangeIters, rangeIters, rangeSum, ranges, ranges, spillK, rangeSum,
		n, stackedX, stackedY, stackedNames, goneCalls, inlinedCalls, inlinedXSum, closureCalls, closureSum, ifaceeqRuns, nestedAdds, escapedSum, stackedNameLen, total)
}
