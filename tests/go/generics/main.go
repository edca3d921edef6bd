// The truth for tests/generics.rs: one generic function called with three type
// arguments, two of which share a GC shape (int and MyInt: main.Sum[go.shape.int]); a
// method of a generic type (its dictionary after the receiver), one instantiation with
// a pointer shape; a function of two type parameters. Each is called a known number of
// times (from the argument N), and the program prints its own counts as
// `truth NAME=COUNT`, NAME the instantiation as gtrace's `func` names it. A generic
// function inlined at every call, whose counts it prints on the line `inlined`.
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
)

type MyInt int

//go:noinline
func Sum[T ~int | ~string](xs ...T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

type Stack[T any] struct{ xs []T }

//go:noinline
func (s *Stack[T]) Push(x T) { s.xs = append(s.xs, x) }

type Pair[K comparable, V any] struct {
	Key K
	Val V
}

//go:noinline
func MakePair[K comparable, V any](k K, v V) Pair[K, V] { return Pair[K, V]{k, v} }

// Twice is small enough to be inlined at every call: it has no function of its own.
func Twice[T ~int](x T) T { return x*x + x/3 }

var calls = map[string]int{}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	var total int
	for i := 0; i < n; i++ {
		total += Sum(i, 1)
		calls["main.Sum[int]"]++
	}
	for i := 0; i < 2*n; i++ {
		total += int(Sum(MyInt(i)))
		calls["main.Sum[main.MyInt]"]++
	}
	for i := 0; i < 3*n; i++ {
		total += len(Sum("a", "b"))
		calls["main.Sum[string]"]++
	}
	var ints Stack[int]
	var ptrs Stack[*int]
	for i := 0; i < n+1; i++ {
		ints.Push(i)
		calls["main.(*Stack[int]).Push"]++
	}
	for i := 0; i < n+2; i++ {
		ptrs.Push(&total)
		calls["main.(*Stack[*int]).Push"]++
	}
	for i := 0; i < n+3; i++ {
		total += MakePair(i, "x").Key
		calls["main.MakePair[int,string]"]++
	}
	for i := 0; i < 2*n+1; i++ {
		total += MakePair("y", i).Val
		calls["main.MakePair[string,int]"]++
	}
	inlined := map[string]int{}
	for i := 0; i < n+4; i++ {
		total += Twice(i)
		inlined["main.Twice[int]"]++
	}
	for i := 0; i < n+5; i++ {
		total += int(Twice(MyInt(i)))
		inlined["main.Twice[main.MyInt]"]++
	}
	fmt.Printf("inlined main.Twice[int]=%d main.Twice[main.MyInt]=%d\n", inlined["main.Twice[int]"], inlined["main.Twice[main.MyInt]"])
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Printf("truth %s=%d\n", name, calls[name])
	}
	fmt.Printf("total=%d stacked=%d\n", total, len(ints.xs)+len(ptrs.xs))
}
