// Package main exercises Go's calling conventions on arm64, built with GOARCH=arm64 by
// Go 1.17 (every argument on the stack) and by Go 1.18 and later (ABIInternal: R0-R15,
// F0-F15): tests/arm64.rs lists its functions with gtrace and checks the locations
// against src/cmd/compile/abi-internal.md and `go tool objdump`. No generics, so that
// Go 1.17 builds it. Most functions are leaves (no frame), so that the stack offsets they
// read in objdump are their arguments' offsets at entry.
package main

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
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

// MyInt is a named integer type.
type MyInt int32

var sink int64

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
	return len(b) + cap(b)
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

// many has 17 int parameters: one more than the 16 integer registers.
//
//go:noinline
func many(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q int) int {
	return a + b + c + d + e + f + g + h + i + j + k + l + m + n + o + p + q
}

// spill: the string does not fit in the one register left (R15), so it goes to the
// stack and the int after it still gets R15.
//
//go:noinline
func spill(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o int, s string, last int) int {
	return a + b + c + d + e + f + g + h + i + j + k + l + m + n + o + len(s) + last
}

// manyResults returns 17 ints: the last on the stack.
//
//go:noinline
func manyResults(x int) (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q int) {
	return x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7, x + 8, x + 9, x + 10, x + 11, x + 12, x + 13, x + 14, x + 15, x + 16
}

//go:noinline
func (c Counter) Value(add int) int {
	return c.N + add + len(c.Name)
}

//go:noinline
func (c *Counter) Inc(by int) {
	c.N += by
}

//go:noinline
func iface(v interface{}, e error, s fmt.Stringer) bool {
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

// stackResults returns an array, which goes to the stack, and a string in registers.
//
//go:noinline
func stackResults(a [2]int, n int) (r [2]int, s string) {
	r[0], r[1] = a[1]+n, a[0]
	return r, "ok"
}

//go:noinline
func raw(p unsafe.Pointer, c complex128, d time.Duration, m MyInt) uintptr {
	return uintptr(p) + uintptr(real(c)) + uintptr(d) + uintptr(m)
}

// bump adds atomically: without LSE atomics, an exclusive load/store loop.
//
//go:noinline
func bump(p *int64, by int64) int64 {
	return atomic.AddInt64(p, by)
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

// mediumFrame has a frame larger than the small-frame limit: `SUB $N, RSP, R17` before
// the compare.
//
//go:noinline
func mediumFrame(n int) int {
	var buf [1000]byte
	buf[n%len(buf)] = byte(n)
	return int(buf[(n+1)%len(buf)]) + recurse(0)
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

// fail never returns: it has no RET at all.
//
//go:noinline
func fail(msg string) {
	panic(msg)
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
	total += int64(many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17))
	total += int64(spill(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "s", 17))
	a, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, q := manyResults(int(total))
	total += int64(a + q)
	total += int64(c.Value(1))
	if flag(true, 1) {
		total++
	}
	if iface(1, errors.New("e"), nil) {
		total++
	}
	total += int64(float(1.5, 2, 3.5))
	nq, err := named(int(total))
	if err == nil {
		total += int64(nq)
	}
	n, s := unnamed(int(total))
	total += int64(n + len(s))
	total += int64(mixed(&Pair{A: 1}, map[string]int{"a": 1}, make(chan int, 1), func(x int) int { return x + 1 }))
	total += int64(recurse(10) + mediumFrame(3) + hugeFrame(7))
	r, rs := stackResults([2]int{1, 2}, 3)
	total += int64(r[0] + r[1] + len(rs))
	x := 1
	total += int64(raw(unsafe.Pointer(&x), complex(1, 2), time.Second, 3) & 1)
	total += bump(&sink, 1)
	if total < 0 {
		fail("negative")
	}
	fmt.Fprintln(os.Stdout, total)
}
