// planrun: values held in interfaces, handed to a function gtrace probes, for
// tests/planrun.rs: a direct trace and a plan run on a stripped copy of the same build
// must print each value as the program's own fmt does. The program prints, for each
// call, `go held I VALUE` with fmt's %v of what it hands over.
package main

import (
	"errors"
	"fmt"
)

type Point struct{ X, Y int }

type Pair struct {
	Name string
	At   Point
}

type Celsius float64

//go:noinline
func hold(i int, v interface{}) int { return i }

func main() {
	held := []interface{}{
		&Point{3, 4},
		Point{5, 6},
		&Pair{"p", Point{7, 8}},
		Pair{"q", Point{9, 10}},
		Celsius(21.5),
		[]interface{}{1, "two", true, Point{1, 2}},
		[]interface{}{},
		[]error{errors.New("boom"), nil},
		42,
		"text",
		errors.New("bad"),
	}
	for i, v := range held {
		fmt.Printf("go held %d %v\n", i, v)
		hold(i, v)
	}
	fmt.Printf("go count=%d\n", len(held))
}
