// floats: float32 and float64 values in memory (struct fields behind a pointer, slice
// elements, an array on the stack, channels), each handed to a function gtrace probes.
// The program prints its own truth with fmt, in the shapes the test's scripts print, so
// that lines compare one to one (tests/floats.rs).
package main

import (
	"fmt"
	"math"
)

type Reading struct {
	Name  string
	Temp  float64
	Ratio float32
	Prev  float64
	N     int
}

//go:noinline
func observe(r *Reading) int { return r.N }

//go:noinline
func series(xs []float64, ys []float32) int { return len(xs) + len(ys) }

//go:noinline
func pair(a [2]float64, n int) int { return n }

//go:noinline
func inRegister(x float64) float64 { return x * 2 }

//go:noinline
func queue(ch chan int, done chan struct{}) int { return len(ch) }

var values = []float64{
	0.1, 1e6, 123456789.0, 100000, 1e-5, 0.0001, 5e-324, math.Copysign(0, -1), 0,
	math.NaN(), math.Inf(1), math.Inf(-1), 1e21, math.MaxFloat64, math.SmallestNonzeroFloat64,
	1.0 / 3.0, 2.5, -1.5, 0.125, 1234.5678, -0.000012345, 1e20, 12345678, 1.5, 3.4028235e38,
	16777216, 1e-45, 0.1, 2.5,
}

func main() {
	for i, v := range values {
		r := &Reading{Name: fmt.Sprint("r", i), Temp: v, Ratio: float32(v), Prev: values[(i+1)%len(values)], N: i}
		fmt.Printf("go v %d %v %v %v\n", i, r.Temp, r.Ratio, r.Prev)
		fmt.Printf("go p %d %.3f %e %g %.2e %8.3f %+.1f %.3g %E %G %-9.2f| %09.3f\n", i, r.Temp, r.Temp, r.Ratio, r.Ratio, r.Temp, r.Temp, r.Temp, r.Temp, r.Ratio, r.Temp, r.Temp)
		fmt.Printf("go c %d %t %t %t %t %t %t %t %t %t %t %t %t\n", i,
			r.Temp < 1.5, r.Temp <= 0, r.Temp == 0, r.Temp != 0, r.Temp > -1e300, r.Temp >= 2.5,
			r.Ratio < 0.1, r.Ratio == 0.1, r.Temp == r.Temp, r.Temp < r.Prev, -r.Temp < 0, r.Temp > 1e9)
		observe(r)
	}
	keys := map[uint64]int{}
	for _, v := range values {
		keys[math.Float64bits(v)]++
	}
	for bits, n := range keys {
		fmt.Printf("go key %v %d\n", math.Float64frombits(bits), n)
	}
	xs := []float64{1.25, -2, math.Inf(1)}
	ys := []float32{0.3, 7, float32(math.NaN())}
	fmt.Printf("go s %v %v %v %v %d\n", xs[0], xs[2], ys[0], ys[1], len(xs))
	series(xs, ys)
	fmt.Printf("go a %v %v\n", 0.75, -8.5e-10)
	pair([2]float64{0.75, -8.5e-10}, 3)
	inRegister(1.5)
	ch := make(chan int, 5)
	ch <- 1
	ch <- 2
	fmt.Printf("go ch %d %d %d %d\n", len(ch), cap(ch), 0, 0)
	queue(ch, nil)
	fmt.Printf("values=%d\n", len(values))
}
