// fleet: the Go program of gtrace's container and cgroup tests. It prints "ready" with
// its pid as it sees itself (in its own pid namespace, a small number), then for each
// line N read on stdin calls work N times and prints its own truth: the calls, the sum
// of their arguments, its pid and its cgroup (v2) as /proc/self/cgroup says. It ends
// when stdin is closed.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

//go:noinline
func work(i int) int { return i * 3 }

// cgroup is the process's cgroup in the unified (v2) hierarchy: the "0::" line.
func cgroup() string {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return "?"
}

func main() {
	in := bufio.NewReader(os.Stdin)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			continue
		}
		calls, sum := 0, 0
		for i := 0; i < n; i++ {
			work(i)
			calls++
			sum += i
		}
		fmt.Printf("truth: calls=%d sum=%d pid=%d cgroup=%s\n", calls, sum, os.Getpid(), cgroup())
	}
}
