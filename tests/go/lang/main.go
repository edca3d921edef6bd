// lang: the Go side of gtrace's language tests. Each traced function is called with
// known arguments and the program prints, for each call, what Go computes from them in
// the very format the gtrace script prints (its lines start with "go "), so the two can be
// compared line by line: integer arithmetic, shifts, division, conversions and
// comparisons on Go's types; lhist buckets of extreme values; strings and call stacks a
// probe stores and another reads back.
package main

import (
	"fmt"
	"math"
)

//go:noinline
func mix(a int8, b uint32, c int64, d uint64, s uint, z int64, q int64, u uint8) {}

// quo is what gtrace defines for x / y: Go's truncated division, and 0 for y == 0
// (where Go panics).
func quo(x, y int64) int64 {
	if y == 0 {
		return 0
	}
	return x / y
}

func rem(x, y int64) int64 {
	if y == 0 {
		return 0
	}
	return x % y
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// mixes counts the `go mix` lines, printed at the end as `mixes=N`.
var mixes int

func mixLine(a int8, b uint32, c int64, d uint64, s uint, z int64, q int64, u uint8) {
	mix(a, b, c, d, s, z, q, u)
	mixes++
	fmt.Printf("go mix lt=%d gt=%d shl=%d shr=%d ushr=%d wrap=%d addu=%d neg=%d quo=%d rem=%d quoz=%d remz=%d u16=%d i8=%d\n",
		b2i(int64(a) < int64(b)), b2i(b > 3000000000), c<<s, c>>s, d>>s, a<<3, u+200, -a,
		quo(c, q), rem(c, q), quo(c, z), rem(c, z), uint16(a), int8(c))
}

//go:noinline
func sample(v int64) {}

//go:noinline
func sampleU(v uint64) {}

// Bucket i of lhist(v, lo, hi, step) as gtrace defines it: 0 below lo, 1+(v-lo)/step,
// the last from hi up.
func bucket(v, lo, hi, step int64) uint64 {
	n := (uint64(hi)-uint64(lo)-1)/uint64(step) + 3
	switch {
	case v < lo:
		return 0
	case v >= hi:
		return n - 1
	}
	return 1 + (uint64(v)-uint64(lo))/uint64(step)
}

//go:noinline
func store(id int, s string) {}

//go:noinline
func recall(id int) {}

//go:noinline
func ptrs(p *int64, q *string, r *int64) {}

//go:noinline
func leaf() {}

//go:noinline
func middle() { leaf() }

//go:noinline
func viaA() { middle() }

//go:noinline
func viaB() { middle() }

func main() {
	for _, a := range []int8{-1, 127, -128, 5} {
		for _, s := range []uint{0, 3, 63, 64, 65, 200} {
			for _, c := range []int64{-7, 9, math.MinInt64, 1 << 40} {
				for _, q := range []int64{2, -1, 3} {
					mixLine(a, 4000000000, c, math.MaxUint64-uint64(c), s, 0, q, uint8(a))
				}
			}
		}
	}

	// lhist(v, -MaxInt64, MaxInt64, 1<<62): six buckets over the whole int64 range.
	lo, hi, step := int64(-math.MaxInt64), int64(math.MaxInt64), int64(1)<<62
	counts := map[uint64]int{}
	for _, v := range []int64{math.MinInt64, -1<<62 - 5, -1, 0, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		sample(v)
		counts[bucket(v, lo, hi, step)]++
	}
	for i := uint64(0); i < 6; i++ {
		fmt.Printf("go lhist %d=%d\n", i, counts[i])
	}
	// lhist(v, 10, 100, 10) of unsigned values, some above 1<<63.
	ucounts := map[uint64]int{}
	for _, v := range []uint64{0, 9, 10, 55, 99, 100, 1 << 63, math.MaxUint64} {
		sampleU(v)
		i := uint64(0)
		switch {
		case v < 10:
		case v >= 100:
			i = 10
		default:
			i = 1 + (v-10)/10
		}
		ucounts[i]++
	}
	for i := uint64(0); i < 11; i++ {
		fmt.Printf("go ulhist %d=%d\n", i, ucounts[i])
	}

	// Strings stored by one probe, read back by another.
	names := map[int]string{}
	last := ""
	recalls := 0
	for i, s := range []string{"alpha", "beta", "gamma", "delta"} {
		id := i % 3
		store(id, s)
		names[id], last = s, s
		recall(id)
		fmt.Printf("go recall %d %s %s\n", id, names[id], last)
		recall(id + 7)
		fmt.Printf("go recall %d %s %s\n", id+7, names[id+7], last)
		recalls += 2
	}

	x, y := int64(1), "y"
	ptrs(&x, &y, nil)

	// Call stacks stored at middle, read back at leaf.
	for i := 0; i < 3; i++ {
		viaA()
	}
	for i := 0; i < 5; i++ {
		viaB()
	}
	fmt.Println("stacks viaA=3 viaB=5")
	fmt.Printf("mixes=%d recalls=%d\n", mixes, recalls)
}
