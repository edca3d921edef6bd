// results: functions with named results and a deferred closure that recovers a panic
// into `err`, a common Go pattern (Go 1.26's DWARF lists such results twice). Each call
// prints its results as gtrace's return probes print them, for the two to be compared.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

//go:noinline
func risky(n int) (q int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered: %v", r)
		}
	}()
	if n%4 == 3 {
		panic("three")
	}
	if n%5 == 4 {
		return -n, errors.New("four")
	}
	return 100 / (n%7 - 6), nil
}

//go:noinline
func labelled(n int, s string) (q int, label string, err error) {
	defer func() {
		if r := recover(); r != nil {
			q, err = -1, fmt.Errorf("recovered: %v", r)
		}
	}()
	if n%3 == 2 {
		panic(s)
	}
	return n * 2, s + "!", nil
}

//go:noinline
func blank(n int) (q int, _ int, err error) {
	defer func() { n++ }()
	if n%2 == 1 {
		return n, n + 1, errors.New("odd")
	}
	return n, n + 2, nil
}

// Pair is small enough to inline: its Get is inlined where it is called directly, and
// kept out of line for the method value main calls through apply. Go's DWARF names the
// function by an abstract DIE that lists no unnamed result; the out-of-line copy does.
type Pair struct{ A, B int }

func (p Pair) Get() (int, error) {
	if p.A < 0 {
		return 0, errors.New("negative")
	}
	return p.A + p.B, nil
}

//go:noinline
func apply(f func(Pair) (int, error), p Pair) int {
	v, _ := f(p)
	return v
}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	lines := 0
	for i := 0; i < n; i++ {
		q, err := risky(i)
		fmt.Printf("go risky q=%d err=%v\n", q, err)
		q, label, err := labelled(i, "s"+strconv.Itoa(i))
		fmt.Printf("go labelled q=%d label=%s err=%v\n", q, label, err)
		q, b, err := blank(i)
		fmt.Printf("go blank q=%d b=%d err=%v\n", q, b, err)
		// The direct call is inlined, so a probe sees the out-of-line one alone: its value
		// is on a line of its own.
		direct, _ := Pair{i, 1}.Get()
		fmt.Printf("go get q=%d\ndirect=%d\n", apply(Pair.Get, Pair{i, 2}), direct)
		lines += 4
	}
	fmt.Printf("lines=%d\n", lines)
}
