// values: Go values of every shape the register ABI passes, each function called a known
// number of times with known values; the program prints its own truth as `key=value`
// words for gtrace's end-to-end tests (tests/values.rs) to compare with.
package main

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

type URL struct {
	Host string
	Path string
}

type Request struct {
	Method string
	URL    *URL
	Size   int
}

type Wrapper struct{ Req *Request }

type Point struct{ X, Y int }

//go:noinline
func handle(r *Request) int { return r.Size }

//go:noinline
func deep(w *Wrapper) int { return len(w.Req.URL.Path) }

// Embedded fields: Conn's fields promote those of parseState (a struct in place) and
// of *Meta (a pointer followed), as Go's selectors do.
type parseState struct {
	state   int
	subject []byte
}

type Meta struct{ Tenant string }

type Conn struct {
	id int
	parseState
	*Meta
}

//go:noinline
func process(c *Conn) int { return c.state + len(c.subject) }

// Two embedded fields with a field of one name: selecting it is ambiguous in Go.
type Left struct{ Name string }
type Right struct{ Name string }
type Both struct {
	Left
	Right
}

//go:noinline
func both(b *Both) int { return len(b.Left.Name) + len(b.Right.Name) }

//go:noinline
func greet(name string, n int) int { return len(name) + n }

//go:noinline
func total(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

//go:noinline
func split(p Point) int { return p.X - p.Y }

//go:noinline
func onStack(n int, a [3]int) int { return n + a[0] + a[1] + a[2] }

//go:noinline
func many(a, b, c, d, e, f, g, h, i, j, k int) int { return a + b + c + d + e + f + g + h + i + j + k }

//go:noinline
func check(err error) bool { return err == nil }

//go:noinline
func (p Point) Norm1() int { return abs(p.X) + abs(p.Y) }

//go:noinline
func named(n int) (q int, err error) {
	if n%3 == 0 {
		return 0, errors.New("divisible by three")
	}
	return n * 10, nil
}

//go:noinline
func dur(d time.Duration) time.Duration { return d * 2 }

//go:noinline
func fl(x float64) float64 { return x * 2 }

//go:noinline
func Max[T int | int64](a, b T) T {
	if a > b {
		return a
	}
	return b
}

//go:noinline
func narrow(a int8, b uint8, c int16, d uint32, ok bool) int {
	if ok {
		return int(a) + int(b) + int(c) + int(d)
	}
	return 0
}

//go:noinline
func describe(v any) bool { return v != nil }

//go:noinline
func inspect(v any) bool { return v != nil }

//go:noinline
func countKeys(m map[string]int) int { return len(m) }

// Ten does not fit in the nine integer registers: the whole struct goes on the stack.
type Ten struct{ A, B, C, D, E, F, G, H, I, J int }

//go:noinline
func ten(n int, t Ten) int { return n + t.A + t.J }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func main() {
	hosts, urlPaths, big := map[string]int{}, map[string]int{}, map[string]int{}
	size := 0
	// Held in an interface, *Request has a runtime type descriptor: what a stripped
	// build's assertions find (tests/cases/values.cases).
	var last any
	for i := 0; i < 30; i++ {
		host := []string{"a.example", "b.example", "c.example"}[i%3]
		if i%5 == 0 {
			host = "d.example"
		}
		r := &Request{Method: "GET", URL: &URL{Host: host, Path: fmt.Sprintf("/p/%d", i%4)}, Size: i * 11}
		hosts[host]++
		urlPaths[r.URL.Path]++
		if r.Size > 150 {
			big[host]++
		}
		size += r.Size
		last = r
		handle(r)
	}
	for h, n := range hosts {
		fmt.Printf("host:%s=%d ", h, n)
	}
	for h, n := range big {
		fmt.Printf("big:%s=%d ", h, n)
	}
	for p, n := range urlPaths {
		fmt.Printf("path:%s=%d ", p, n)
	}
	fmt.Printf("size=%d last=%T\n", size, last)

	paths := map[string]int{}
	for i := 0; i < 12; i++ {
		p := fmt.Sprintf("/deep/%d", i%2)
		paths[p]++
		deep(&Wrapper{Req: &Request{URL: &URL{Path: p}}})
	}
	fmt.Printf("deep:/deep/0=%d deep:/deep/1=%d\n", paths["/deep/0"], paths["/deep/1"])

	subjects, tenants, states := map[string]int{}, map[string]int{}, 0
	for i := 0; i < 21; i++ {
		c := &Conn{id: i, parseState: parseState{state: i % 4, subject: []byte(fmt.Sprintf("orders.%d", i%3))}}
		c.Meta = &Meta{Tenant: []string{"acme", "globex"}[i%2]}
		subjects[string(c.subject)]++
		tenants[c.Tenant]++
		states += c.state
		process(c)
	}
	for k, n := range subjects {
		fmt.Printf("subject:%s=%d ", k, n)
	}
	for k, n := range tenants {
		fmt.Printf("tenant:%s=%d ", k, n)
	}
	fmt.Printf("states=%d\n", states)
	both(&Both{Left{"l"}, Right{"r"}})

	long := strings.Repeat("x", 100)
	names := []string{"alice", "bob", "albert", "", long}
	bob, al, nameLen, alice, empty, long100, longest := 0, 0, 0, 0, 0, 0, 0
	for i := 0; i < 20; i++ {
		name := names[i%len(names)]
		switch name {
		case "alice":
			alice++
		case "":
			empty++
		case long:
			long100++
		}
		if len(name) > longest {
			longest = len(name)
		}
		if name == "bob" {
			bob++
		}
		if strings.HasPrefix(name, "al") {
			al++
		}
		nameLen += len(name)
		greet(name, i)
	}
	fmt.Printf("greet=20 bob=%d al=%d namelen=%d alice=%d empty=%d long100=%d longest=%d\n",
		bob, al, nameLen, alice, empty, long100, longest)

	first, lens := 0, 0
	for i := 0; i < 10; i++ {
		xs := make([]int, i+1)
		for j := range xs {
			xs[j] = i*100 + j
		}
		first += xs[0]
		lens += len(xs)
		total(xs)
	}
	fmt.Printf("total=10 first=%d lens=%d\n", first, lens)

	sx, sy, sa2, sn, sj, sk, norm := 0, 0, 0, 0, 0, 0, 0
	for i := 0; i < 15; i++ {
		p := Point{X: i, Y: -2 * i}
		sx += p.X
		sy += p.Y
		split(p)
		norm += p.X
		p.Norm1()
		a := [3]int{i, i + 1, i + 2}
		sa2 += a[2]
		sn += i
		onStack(i, a)
		sj += i * 10
		sk += i * 11
		many(1, 2, 3, 4, 5, 6, 7, 8, 9, i*10, i*11)
	}
	fmt.Printf("points=15 sx=%d sy=%d sa2=%d sn=%d sj=%d sk=%d normx=%d\n", sx, sy, sa2, sn, sj, sk, norm)

	errs, oks, qs, nils, nonnil := 0, 0, 0, 0, 0
	for i := 1; i <= 12; i++ {
		q, err := named(i)
		if err != nil {
			errs++
		} else {
			oks++
			qs += q
		}
		if check(err) {
			nils++
		} else {
			nonnil++
		}
	}
	fmt.Printf("named=12 errs=%d oks=%d qs=%d nils=%d nonnil=%d\n", errs, oks, qs, nils, nonnil)

	dur(1500 * time.Microsecond)
	fl(1.5)
	ma := 0
	for i := 0; i < 6; i++ {
		Max(i, 3)
		Max(int64(i), 2)
		ma += i
	}
	fmt.Printf("max=12 maxa=%d\n", 2*ma)

	na, oks := 0, 0
	for i := 0; i < 40; i++ {
		a, b, c, d := int8(-i), uint8(200+i), int16(-300*i), uint32(4000000000+uint32(i))
		narrow(a, b, c, d, i%2 == 0)
		na += int(a) + int(b) + int(c) + int(d)
		if i%2 == 0 {
			oks++
		}
	}
	fmt.Printf("narrow=40 narrowsum=%d narrowok=%d\n", na, oks)

	keys, nilMaps := 0, 0
	for i := 0; i < 6; i++ {
		var m map[string]int // nil for i == 0
		if i > 0 {
			m = map[string]int{}
			for j := 0; j < i*3; j++ {
				m[fmt.Sprint(j)] = j
			}
		}
		keys += len(m)
		if m == nil {
			nilMaps++
		}
		countKeys(m)
	}
	fmt.Printf("maps=6 keys=%d nilmaps=%d\n", keys, nilMaps)

	// Interfaces holding several dynamic types, for v.(*T) (tests/cases/values.cases).
	points, pointX, requestSize := 0, 0, 0
	for _, v := range []any{&Point{X: 3}, Point{X: 5}, &Request{Size: 7}, nil, &Point{X: 4}, "s", &Request{Size: 2}} {
		switch p := v.(type) {
		case *Point:
			points++
			pointX += p.X
		case *Request:
			requestSize += p.Size
		}
		inspect(v)
	}
	fmt.Printf("inspected=7 inspected_points=%d inspected_x=%d inspected_size=%d\n", points, pointX, requestSize)

	tj, ta := 0, 0
	for i := 0; i < 10; i++ {
		ten(i, Ten{A: i * 2, J: i * 7})
		tj += i * 7
		ta += i * 2
	}
	fmt.Printf("ten=10 tenj=%d tena=%d\n", tj, ta)

	for _, v := range []any{"hi", 42, int8(-3), true, nil, &Point{X: 1}} {
		describe(v)
	}
}
