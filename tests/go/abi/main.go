// Package main exercises Go's ABIInternal argument assignment on amd64: every function
// is a case that tests/target.rs checks against src/cmd/compile/abi-internal.md.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"
)

// Pair fits in two integer registers.
type Pair struct {
	A int64
	B int32
}

// Big has an array of length > 1, so it always goes to the stack.
type Big struct {
	X   int64
	Arr [4]int32
}

// Counter has value and pointer receiver methods.
type Counter struct {
	N    int
	Name string
}

//go:noinline
func ints(a int8, b int16, c int32, d int64, e uint8, f uint16, g uint32, h uint64, i uintptr) int64 {
	return int64(a) + int64(b) + int64(c) + d + int64(e) + int64(f) + int64(g) + int64(h) + int64(i)
}

//go:noinline
func flag(b bool, n int) bool {
	return b && n > 0
}

//go:noinline
func str(s string, n int) int {
	return len(s) + n
}

//go:noinline
func bytesLen(b []byte) int {
	return len(b)
}

//go:noinline
func pair(n int, p Pair) int64 {
	return int64(n) + p.A + int64(p.B)
}

//go:noinline
func big(n int, b Big) int64 {
	return int64(n) + b.X + int64(b.Arr[0])
}

//go:noinline
func array(a [3]int, one [1]string) int {
	return a[0] + a[1] + a[2] + len(one[0])
}

// many has 11 int parameters: two more than the 9 integer registers.
//
//go:noinline
func many(a, b, c, d, e, f, g, h, i, j, k int) int {
	return a + b + c + d + e + f + g + h + i + j + k
}

// spill: the string does not fit in the one register left, so it goes to the stack and
// the int after it still gets a register.
//
//go:noinline
func spill(a, b, c, d, e, f, g, h int, s string, last int) int {
	return a + b + c + d + e + f + g + h + len(s) + last
}

//go:noinline
func (c Counter) Value(add int) int {
	return c.N + add
}

//go:noinline
func (c *Counter) Inc(by int) {
	c.N += by
}

//go:noinline
func Sum[T int | float64](xs []T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

// Stack is a generic type; its methods get a hidden dictionary argument too.
type Stack[T any] struct {
	items []T
}

//go:noinline
func (s *Stack[T]) Push(v T) int {
	s.items = append(s.items, v)
	return len(s.items)
}

//go:noinline
func iface(v any, e error, s fmt.Stringer) bool {
	return v != nil && e != nil && s == nil
}

//go:noinline
func float(f float64, n int, g float32) float64 {
	return f + float64(n) + float64(g)
}

//go:noinline
func named(n int) (q int, err error) {
	if n < 0 {
		return 0, errors.New("negative")
	}
	return n / 2, nil
}

//go:noinline
func unnamed(n int) (int, string) {
	if n == 0 {
		return 0, "zero"
	}
	return n, "other"
}

//go:noinline
func mixed(p *Pair, m map[string]int, ch chan int, fn func(int) int) int {
	return int(p.A) + len(m) + len(ch) + fn(1)
}

// stackResults returns an array, which goes to the stack, and a string in RAX, RBX.
//
//go:noinline
func stackResults(a [2]int, n int) (r [2]int, s string) {
	r[0], r[1] = a[1]+n, a[0]
	return r, "ok"
}

// MyInt is a named integer type: DWARF calls it main.MyInt, a base type.
type MyInt int32

//go:noinline
func raw(p unsafe.Pointer, c complex128, d time.Duration, m MyInt) uintptr {
	return uintptr(p) + uintptr(real(c)) + uintptr(d) + uintptr(m)
}

// fail never returns: it has no RET at all.
//
//go:noinline
func fail(msg string) {
	panic(msg)
}

// leaf has no stack check: it calls nothing and needs no frame.
//
//go:noinline
func leaf(a, b int) int {
	return a*b + 1
}

// recurse needs a frame and so has a stack check.
//
//go:noinline
func recurse(n int) int {
	var buf [64]byte
	buf[n%64] = byte(n)
	if n <= 0 {
		return int(buf[0])
	}
	return recurse(n-1) + int(buf[n%64])
}

// hugeFrame has a frame larger than the stack guard: its prologue checks for
// wrap-around before it compares with the guard.
//
//go:noinline
func hugeFrame(n int) int {
	var buf [100000]byte
	buf[n%len(buf)] = byte(n)
	return int(buf[(n+1)%len(buf)]) + recurse(0)
}

func main() {
	c := &Counter{N: 1, Name: "c"}
	c.Inc(2)
	total := ints(1, 2, 3, 4, 5, 6, 7, 8, 9)
	total += int64(str("hello", 1))
	total += int64(bytesLen([]byte("abc")))
	total += pair(1, Pair{A: 2, B: 3})
	total += big(1, Big{X: 2, Arr: [4]int32{3, 4, 5, 6}})
	total += int64(array([3]int{1, 2, 3}, [1]string{"x"}))
	total += int64(many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11))
	total += int64(spill(1, 2, 3, 4, 5, 6, 7, 8, "s", 10))
	total += int64(c.Value(1))
	total += int64(Sum([]int{1, 2, 3}))
	total += int64(Sum([]float64{1.5, 2.5}))
	st := &Stack[string]{}
	total += int64(st.Push("a"))
	if flag(true, 1) {
		total++
	}
	if iface(1, errors.New("e"), nil) {
		total++
	}
	total += int64(float(1.5, 2, 3.5))
	q, err := named(int(total))
	if err == nil {
		total += int64(q)
	}
	n, s := unnamed(int(total))
	total += int64(n + len(s))
	total += int64(mixed(&Pair{A: 1}, map[string]int{"a": 1}, make(chan int, 1), func(x int) int { return x + 1 }))
	total += int64(leaf(3, 4))
	total += int64(recurse(10))
	total += int64(hugeFrame(7))
	r, rs := stackResults([2]int{1, 2}, 3)
	total += int64(r[0] + r[1] + len(rs))
	x := 1
	total += int64(raw(unsafe.Pointer(&x), complex(1, 2), time.Second, 3) & 1)
	if total < 0 {
		fail("negative")
	}
	fmt.Fprintln(os.Stdout, total)
}
