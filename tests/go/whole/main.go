// whole: whole Go values (structs with every kind of field, arrays, slices, pointers,
// interfaces, channels, complex numbers, durations) handed to functions gtrace probes;
// the program prints with fmt what it hands over, with the verbs the test's scripts
// use, so that gtrace's copy of each value prints the same bytes (tests/whole.rs). Where
// a --depth, --max-fields, --max-elems or --string-limit cuts a value, the program prints
// the shown parts with fmt and `...` where the cut is.
package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	box1 "whole/p1/shape"
	box2 "whole/p2/shape"
)

type Limits struct {
	Max   int32
	Tags  []string
	ratio float64
}

type Config struct {
	Port    int
	Name    string
	Ratio   float64
	Limits  *Limits
	Inline  Limits
	Ports   []int
	Grid    [2][2]int8
	Enabled bool
	Timeout time.Duration
	timeout time.Duration
	Err     error
	err     error
	Any     interface{}
	Nothing interface{}
	C       complex128
	Bytes   []byte
	Ch      chan int
	Next    *Config
	U8      uint8
	Empty   []string
}

type Point struct{ X, Y int }

//go:noinline
func show(c Config, p *Config) int { return c.Port + p.Port }

//go:noinline
func points(ps []Point, a [3]Point, pp *Point) int { return len(ps) + len(a) + pp.X }

//go:noinline
func small(p Point) int { return p.X }

//go:noinline
func describe(i int, v interface{}, err error) int { return i }

func main() {
	boom := errors.New("boom")
	c := Config{
		Port:    8080,
		Name:    "acc",
		Ratio:   0.5,
		Limits:  &Limits{Max: 3, Tags: []string{"a"}},
		Inline:  Limits{Max: 7, Tags: []string{"x", "y z", ""}, ratio: 1e-7},
		Ports:   []int{80, 443, 8080, 9090, 10000},
		Grid:    [2][2]int8{{1, -2}, {3, 4}},
		Enabled: true,
		Timeout: 1500 * time.Millisecond,
		timeout: 2 * time.Second,
		Err:     boom,
		err:     boom,
		Any:     42,
		C:       complex(1, -2.5),
		Bytes:   []byte{1, 2, 255},
		Ch:      make(chan int, 3),
		U8:      200,
	}
	fmt.Printf("go v %v\n", c)
	fmt.Printf("go +v %+v\n", c)
	fmt.Printf("go #v %#v\n", c)
	fmt.Printf("go pv %v\n", &c)
	fmt.Printf("go p+v %+v\n", &c)
	fmt.Printf("go p#v %#v\n", &c)
	// --depth 1: the composites two levels down are cut.
	full := fmt.Sprintf("%v", c)
	full = strings.Replace(full, fmt.Sprint(c.Inline.Tags), "[...]", 1)
	full = strings.Replace(full, fmt.Sprint(c.Grid), "[[...] [...]]", 1)
	fmt.Printf("go d1 %s\n", full)
	sharp := fmt.Sprintf("%#v", c)
	sharp = strings.Replace(sharp, fmt.Sprintf("%#v", c.Inline.Tags), "[]string{...}", 1)
	sharp = strings.Replace(sharp, fmt.Sprintf("%#v", c.Grid), "[2][2]int8{[2]int8{...}, [2]int8{...}}", 1)
	fmt.Printf("go d1#v %s\n", sharp)
	// --max-fields 3 and --string-limit 2.
	fmt.Printf("go cut {%v %v %v ...}\n", c.Port, c.Name[:2]+"...", c.Ratio)
	fmt.Printf("go cut#v main.Config{Port:%#v, Name:%#v..., Ratio:%#v, ...}\n", c.Port, c.Name[:2], c.Ratio)
	ps := []Point{{1, 2}, {3, 4}, {5, 6}}
	a := [3]Point{{7, 8}, {9, 10}, {11, 12}}
	pp := &Point{13, 14}
	fmt.Printf("go ps %v %+v %#v\n", ps, a, pp)
	// --max-elems 2.
	fmt.Printf("go elems [%v %v ...] [%v %v ...]\n", ps[0], ps[1], a[0], a[1])
	fmt.Printf("go elems#v []main.Point{%#v, %#v, ...}\n", ps[0], ps[1])
	fmt.Printf("go small %v %+v %#v\n", Point{-1, 2}, Point{-1, 2}, Point{-1, 2})
	show(c, &c)
	points(ps, a, pp)
	small(Point{-1, 2})
	wrapped := fmt.Errorf("wrap: %w", boom)
	// Two types both named shape.Box at run time, from two packages named shape.
	anys := []interface{}{42, "hi", int8(-3), true, nil, &Point{5, 6}, Point{7, 8}, uint16(7), 2.5, pp, &box1.Box{W: 3, H: 4}, &box2.Box{Side: 9}}
	errs := []error{nil, boom, wrapped, boom, nil, boom, wrapped, nil, boom, nil, boom, nil}
	for i := range anys {
		fmt.Printf("go iface %d %v|%+v|%#v %v|%+v\n", i, anys[i], anys[i], anys[i], errs[i], errs[i])
		describe(i, anys[i], errs[i])
	}
	fmt.Printf("go iface#v %#v\n", boom)
}
