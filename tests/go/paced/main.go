// paced: requests that arrive alone, each waking a thread, with the program's own CPU
// accounting beside whether gtrace's probes are in its code: the truth for
// tests/duty_cost.rs.
//
//	paced sleep RATE WORKERS WORK
//	paced tcp RATE CONNS WORK
//
// A request calls main.begin, does WORK rounds of a fixed computation (its known work)
// and calls main.end. `sleep`: WORKERS goroutines each make their share of RATE
// requests a second at paced times, sleeping until each (an open loop: a request late
// is not followed by others sent early to catch up). `tcp`: the program serves on
// loopback TCP and is its own client, CONNS connections each sending an 8-byte request
// at its paced times and waiting for the answer; a server goroutine, woken by the
// network poller as Caddy's are, makes the request and answers. Between requests every
// thread sleeps, so each request wakes one.
//
// It prints "ready", then every 10 ms one line until its stdin closes:
//
//	at_ns=UNIX_NS requests=N cpu_ns=NS on=0|1
//
// requests answered so far, the CPU time all its threads have spent by their own
// accounting (the first field of each task's schedstat), and whether main.begin's
// first bytes differ from what they were at start (1: a probe's int3 is in its code,
// the probes are attached).
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

type request struct {
	id   int
	seen int
}

// begin and end call note, so each has a frame and its probe sits on the PUSH after the
// stack check (a trap the kernel emulates), as a server handler's does.
//
//go:noinline
func begin(r *request) { note(&r.id) }

//go:noinline
func end(r *request) { note(&r.seen) }

//go:noinline
func note(n *int) { *n++ }

// work is a request's known work: rounds of FNV-1a over a 1 KiB buffer.
//
//go:noinline
func work(buf []byte, rounds int) uint64 {
	h := uint64(14695981039346656037)
	for r := 0; r < rounds; r++ {
		for _, b := range buf {
			h ^= uint64(b)
			h *= 1099511628211
		}
	}
	return h
}

var answered atomic.Int64

// serve answers one connection's requests.
func serve(c net.Conn, rounds int) {
	defer c.Close()
	r := &request{}
	buf := make([]byte, 1024)
	var in, out [8]byte
	for {
		if _, err := io.ReadFull(c, in[:]); err != nil {
			return
		}
		begin(r)
		h := work(buf, rounds)
		end(r)
		for i := range out {
			out[i] = byte(h >> (8 * i))
		}
		if _, err := c.Write(out[:]); err != nil {
			return
		}
	}
}

// sleeper makes a request every `every`, starting at `first`, sleeping until each.
func sleeper(first time.Time, every time.Duration, rounds int) {
	r := &request{}
	buf := make([]byte, 1024)
	due := first
	for {
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		begin(r)
		work(buf, rounds)
		end(r)
		answered.Add(1)
		due = due.Add(every)
		if now := time.Now(); now.Sub(due) > every {
			due = now
		}
	}
}

// client sends a request every `every`, starting at `first`, and waits for each answer.
func client(addr string, first time.Time, every time.Duration) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var msg, in [8]byte
	due := first
	for {
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if _, err := c.Write(msg[:]); err != nil {
			return
		}
		if _, err := io.ReadFull(c, in[:]); err != nil {
			return
		}
		answered.Add(1)
		due = due.Add(every)
		// Late by more than a period: the missed times are skipped, not sent at once.
		if now := time.Now(); now.Sub(due) > every {
			due = now
		}
	}
}

// cpuNs is what every thread of this process has spent on a CPU so far.
func cpuNs() int64 {
	tasks, _ := os.ReadDir("/proc/self/task")
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		n, _ := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		total += n
	}
	return total
}

// code is the first bytes of main.begin as they are now.
func code() [48]byte {
	return *(*[48]byte)(unsafe.Pointer(reflect.ValueOf(begin).Pointer()))
}

func arg(i int) int {
	n, err := strconv.Atoi(os.Args[i])
	if err != nil || n <= 0 {
		usage()
	}
	return n
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: paced sleep|tcp RATE WORKERS WORK")
	os.Exit(2)
}

func main() {
	if len(os.Args) != 5 {
		usage()
	}
	rate, n, rounds := arg(2), arg(3), arg(4)
	untraced := code()
	every := time.Duration(int64(time.Second) * int64(n) / int64(rate))
	start := time.Now()
	switch os.Args[1] {
	case "sleep":
		for i := 0; i < n; i++ {
			go sleeper(start.Add(every*time.Duration(i)/time.Duration(n)), every, rounds)
		}
	case "tcp":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go serve(c, rounds)
			}
		}()
		for i := 0; i < n; i++ {
			go client(l.Addr().String(), start.Add(every*time.Duration(i)/time.Duration(n)), every)
		}
	default:
		usage()
	}
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		os.Exit(0)
	}()
	fmt.Println("ready")
	out := bufio.NewWriter(os.Stdout)
	for tick := time.NewTicker(10 * time.Millisecond); ; <-tick.C {
		on := 0
		if code() != untraced {
			on = 1
		}
		fmt.Fprintf(out, "at_ns=%d requests=%d cpu_ns=%d on=%d\n", time.Now().UnixNano(), answered.Load(), cpuNs(), on)
		out.Flush()
	}
}
