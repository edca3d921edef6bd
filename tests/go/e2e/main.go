// e2e: the Go program gtrace's end-to-end tests trace. Each mode calls known functions a
// known number of times and prints its own ground truth as `key=value` words, so the
// tests can compare gtrace's output with what really happened.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"
)

type T struct{ total int64 }

//go:noinline
func (t *T) Add(delta int64) { t.total += delta }

//go:noinline
func add(a, b int) int { return a + b }

//go:noinline
func small8(x int8, u uint16, flag bool) int {
	if flag {
		return int(x) + int(u)
	}
	return 0
}

//go:noinline
func sleepy(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

// grow recurses with a large frame, so the runtime copies the stack many times.
//
//go:noinline
func grow(n int) int {
	var pad [512]byte
	pad[n%512] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return grow(n-1) + 1 + int(pad[n%512]) - int(byte(n))
}

//go:noinline
func label(s string) int { return len(s) }

// words holds what a string a program passes around may hold: line breaks, terminal
// escapes, NUL, bytes that are not UTF-8, quotes and backslashes, non-ASCII text; and
// what an HTTP client could put in a path to take over a terminal: set its title, clear
// it, return the cursor and write a line that looks like gtrace's own.
var words = []string{"plain", "two\nlines", "\x1b[31mred\x1b[0m", "nul\x00byte", "bad\xffutf8",
	"tab\there", "quote\"and\\back", "héllo 世界", "zero\u200bwidth", "bell\a",
	"\x1b]0;owned\x07title", "\x1b[2J\x1b[Hclear", "x\r\nAttached 99 probes\n", "del\x7f\x9b1m\u009b2J"}

// Tag is a struct with a string field, printed whole.
type Tag struct {
	Name string
	N    int
}

//go:noinline
func tag(t Tag) int { return len(t.Name) + t.N }

//go:noinline
func fail(err error) bool { return err != nil }

//go:noinline
func other1() int { return 1 }

//go:noinline
func other2() int { return 2 }

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

func main() {
	mode := os.Args[1]
	n := atoi(os.Args[2])
	switch mode {
	case "add":
		sum := 0
		for i := 0; i < n; i++ {
			sum += add(i, 1)
		}
		fmt.Printf("calls=%d sum_a=%d\n", n, n*(n-1)/2)
		_ = sum
	case "method":
		t := &T{}
		for i := 0; i < n; i++ {
			t.Add(int64(i * 3))
		}
		fmt.Printf("calls=%d total=%d\n", n, t.total)
	case "small":
		count, sumX, sumU := 0, 0, 0
		for i := 0; i < n; i++ {
			x, u := int8(-i%100), uint16(i*7)
			small8(x, u, i%2 == 0)
			sumX += int(x)
			sumU += int(u)
			if i%2 == 0 {
				count++
			}
		}
		fmt.Printf("calls=%d true=%d sum_x=%d sum_u=%d\n", n, count, sumX, sumU)
	case "sleep":
		for i := 0; i < n; i++ {
			sleepy(2)
		}
		fmt.Printf("calls=%d\n", n)
	case "grow":
		// Each top-level call recurses n deep on a fresh goroutine: its stack starts small
		// and is copied as it grows.
		done := make(chan int)
		total := 0
		for r := 0; r < 4; r++ {
			go func() { done <- grow(n) }()
			total += <-done
		}
		fmt.Printf("calls=%d result=%d\n", 4*(n+1), total)
	case "hold":
		// Calls add n times and says so, then holds on in sleepy for 30s or argv[3] ms
		// (while a test acts on its tracer), and says when it woke.
		for i := 0; i < n; i++ {
			add(i, 1)
		}
		fmt.Printf("calls=%d\n", n)
		hold := 30000
		if len(os.Args) > 3 {
			hold = atoi(os.Args[3])
		}
		sleepy(hold)
		fmt.Println("woke")
	case "strings":
		for i := 0; i < n; i++ {
			for j, w := range words {
				label(w)
				tag(Tag{Name: w, N: j})
				fail(errors.New(w))
			}
		}
		for _, w := range words {
			fmt.Printf("quoted=%q\n", w)
		}
		fmt.Printf("calls=%d\n", n*len(words))
	case "others":
		s := 0
		for i := 0; i < n; i++ {
			s += other1() + other2()
		}
		fmt.Printf("calls=%d\n", n)
	case "wait":
		// Announce, then wait for the file named by argv[3] before calling add n times.
		fmt.Println("ready")
		for {
			if _, err := os.Stat(os.Args[3]); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		for i := 0; i < n; i++ {
			add(i, 1)
		}
		fmt.Printf("calls=%d sum_a=%d\n", n, n*(n-1)/2)
	case "die":
		// Calls add n times, then ends by a signal: argv[3] says how (crash: a nil
		// pointer dereference with GOTRACEBACK=crash; term, kill: the signal sent to
		// itself). With argv[4], waits for that file first, as "wait" does.
		if len(os.Args) > 4 {
			fmt.Println("ready")
			for {
				if _, err := os.Stat(os.Args[4]); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		for i := 0; i < n; i++ {
			add(i, 1)
		}
		fmt.Printf("calls=%d\n", n)
		die(os.Args[3])
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
}

// die ends the program by a signal.
func die(how string) {
	switch how {
	case "crash":
		debug.SetTraceback("crash")
		var t *T
		t.Add(1)
	case "term":
		syscall.Kill(os.Getpid(), syscall.SIGTERM)
	case "kill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	time.Sleep(10 * time.Second)
	fmt.Println("still alive")
}
