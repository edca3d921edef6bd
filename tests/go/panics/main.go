// panics: calls that panics end, for tests/panics.rs. Every traced function is
// //go:noinline. Each mode prints its own truth: a line `want FUNC recovered=BOOL
// panic=VALUE` for every call a panic ended (VALUE as gtrace prints an interface, made
// from the value recover() returned, or that kills the program), and `count NAME=N`.
//
//	panics mix K     K rounds of every case below, each recovered by a caller
//	panics die       a goroutine dies of a panic that unwinds two traced frames
//	panics many N    N panics of boom, each recovered by guard (no want lines)
//	panics deep N    one panic ends N+1 recursive calls of dive at once
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// printed is how gtrace prints an interface: TYPE("string") for strings and errors.
func printed(v interface{}) string {
	switch x := v.(type) {
	case error:
		return fmt.Sprintf("%T(%q)", x, x.Error())
	case string:
		return fmt.Sprintf("%T(%q)", x, x)
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

var wants = map[string]int{}

func want(r interface{}, recovered bool, funcs ...string) {
	for _, f := range funcs {
		wants[fmt.Sprintf("want main.%s recovered=%v panic=%s", f, recovered, printed(r))]++
	}
}

// boom panics in every third call: its frame is the only one the panic ends.
//
//go:noinline
func boom(i int) int {
	if i%3 == 0 {
		panic("boom")
	}
	return i
}

// guard recovers boom's panic and returns normally.
//
//go:noinline
func guard(i int) (r int) {
	defer func() {
		if v := recover(); v != nil {
			want(v, true, "boom")
			r = -1
		}
	}()
	return boom(i)
}

// inner panics under middle and outer: one panic ends three traced frames.
//
//go:noinline
func inner() int { panic(errors.New("deep")) }

//go:noinline
func middle() int { return inner() + 1 }

//go:noinline
func outer() int { return middle() + 1 }

//go:noinline
func catchNested() {
	defer func() { want(recover(), true, "outer", "middle", "inner") }()
	outer()
}

// deferer returns normally, but its deferred call panics: its RET never runs.
//
//go:noinline
func deferer() int {
	defer func() { panic("in defer") }()
	return 7
}

//go:noinline
func catchDefer() {
	defer func() { want(recover(), true, "deferer") }()
	deferer()
}

// thrower panics; rethrow recovers it in a deferred call and panics again with another
// value: both frames end when catchRe recovers the second panic, whose value they get.
//
//go:noinline
func thrower() int { panic("first") }

//go:noinline
func rethrow() int {
	defer func() {
		r := recover()
		panic(fmt.Errorf("wrapped: %v", r))
	}()
	return thrower()
}

//go:noinline
func catchRe() {
	defer func() { want(recover(), true, "thrower", "rethrow") }()
	rethrow()
}

// twice panics, and a deferred call panics again while the first panic unwinds it.
//
//go:noinline
func twice() int {
	defer func() { panic("second") }()
	panic("first")
}

//go:noinline
func catchTwice() {
	defer func() { want(recover(), true, "twice") }()
	twice()
}

// selfish recovers its own panic: it returns normally, so no panic ends it.
//
//go:noinline
func selfish() (r int) {
	defer func() {
		if recover() != nil {
			r = 1
		}
	}()
	panic("self")
}

// exiter's goroutine ends with runtime.Goexit: its frame ends, but not by a panic.
//
//go:noinline
func exiter() int {
	runtime.Goexit()
	return 0
}

// doomed's goroutine dies of deeper's panic, and the program with it.
//
//go:noinline
func deeper() int { panic(errors.New("fatal")) }

//go:noinline
func doomed() int { return deeper() + 1 }

// dive recurses n times and panics at the bottom.
//
//go:noinline
func dive(n int) int {
	if n == 0 {
		panic("bottom")
	}
	return dive(n-1) + 1
}

func main() {
	mode := os.Args[1]
	n := 1
	if len(os.Args) > 2 {
		n, _ = strconv.Atoi(os.Args[2])
	}
	switch mode {
	case "mix":
		selfishCalls, guards := 0, 0
		for k := 0; k < n; k++ {
			for i := 0; i < 3; i++ {
				guard(k*3 + i)
				guards++
			}
			catchNested()
			catchDefer()
			catchRe()
			catchTwice()
			selfish()
			selfishCalls++
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); exiter() }()
			wg.Wait()
		}
		for line, c := range wants {
			fmt.Printf("%s count=%d\n", line, c)
		}
		fmt.Printf("count guards=%d selfish=%d\n", guards, selfishCalls)
	case "die":
		fmt.Printf("%s count=1\n%s count=1\n", "want main.doomed recovered=false panic="+printed(errors.New("fatal")),
			"want main.deeper recovered=false panic="+printed(errors.New("fatal")))
		os.Stdout.Sync()
		done := make(chan int)
		go func() { done <- doomed() }()
		<-done
	case "deep":
		func() {
			defer func() { recover() }()
			dive(n)
		}()
		fmt.Printf("count dives=%d\n", n+1)
	case "many":
		for i := 0; i < n; i++ {
			guard(i * 3)
		}
		fmt.Printf("count panics=%d\n", n)
	}
}
