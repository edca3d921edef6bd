// pctl: a program that knows the percentiles of what it does, for gtrace's hist()
// percentile tests. `pctl values N` calls sample(v) N times with values of a known,
// wide distribution; `pctl sleeps N` calls work(d) N times, sleeping known amounts, and
// times each call itself. Each prints its exact percentiles (nearest rank: the value at
// rank ceil(q n) of the sorted values) as `truth p50=... p90=... p99=... p999=... min=...
// max=...`, in the values' unit (nanoseconds for sleeps).
package main

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"time"
)

//go:noinline
func sample(v int) int { return v + 1 }

//go:noinline
func work(d time.Duration) { time.Sleep(d) }

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: pctl values|sleeps N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	r := rand.New(rand.NewSource(22))
	var seen []int64
	switch os.Args[1] {
	case "values":
		for i := 0; i < n; i++ {
			// Log-uniform from 1 to 10^9, with a cluster around 5000 beside it.
			v := int(math.Exp(r.Float64() * math.Log(1e9)))
			if i%3 == 0 {
				v = 5000 + r.Intn(400)
			}
			sample(v)
			seen = append(seen, int64(v))
		}
	case "sleeps":
		for i := 0; i < n; i++ {
			d := time.Duration(1000+r.Intn(19000)) * time.Microsecond
			start := time.Now()
			work(d)
			seen = append(seen, int64(time.Since(start)))
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
	sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
	at := func(thousandths int) int64 {
		rank := (len(seen)*thousandths + 999) / 1000
		if rank < 1 {
			rank = 1
		}
		return seen[rank-1]
	}
	fmt.Printf("truth p50=%d p90=%d p99=%d p999=%d min=%d max=%d n=%d\n",
		at(500), at(900), at(990), at(999), seen[0], seen[len(seen)-1], len(seen))
}
