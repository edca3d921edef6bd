package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// getg is in getg_*.s.
func getg() uintptr

// collide finds pairs of goroutines whose g's hash to the same slot of gtrace's array
// of records (slot = (g ^ pid) * mult >> (64 - bits), as gtrace computes it), then lets each
// pair make its first call of tick at the same moment on two threads (the two meet
// at a spinning barrier first), one pair after another. It prints the calls made and
// the pairs found, and how many threads run Go code at once.
func collide(pairs int, mult string, bits int) {
	m, err := strconv.ParseUint(mult, 0, 64)
	if err != nil {
		panic(err)
	}
	const n = 40000
	gs := make([]uintptr, n)
	gates := make([]chan *atomic.Int32, n)
	called := make(chan bool, 2)
	var ready, done sync.WaitGroup
	ready.Add(n)
	for i := 0; i < n; i++ {
		gates[i] = make(chan *atomic.Int32)
		done.Add(1)
		go func(i int) {
			defer done.Done()
			gs[i] = getg()
			ready.Done()
			if met := <-gates[i]; met != nil {
				if met.Add(1) < 2 {
					for spins := 0; met.Load() < 2; spins++ {
						if spins%1024 == 1023 {
							runtime.Gosched()
						}
					}
				}
				tick(i)
				called <- true
			}
		}(i)
	}
	ready.Wait()
	// One pair a slot: a slot a pair claimed is no longer free to race for.
	seen, paired := map[uint64]int{}, map[uint64]bool{}
	var chosen [][2]int
	pid := uint64(os.Getpid())
	for i, g := range gs {
		slot := ((uint64(g) ^ pid) * m) >> (64 - bits)
		if j, ok := seen[slot]; ok && !paired[slot] && len(chosen) < pairs {
			chosen = append(chosen, [2]int{j, i})
			paired[slot] = true
			continue
		}
		seen[slot] = i
	}
	made := 0
	for _, p := range chosen {
		met := new(atomic.Int32)
		for _, i := range p {
			gates[i] <- met
		}
		<-called
		<-called
		made += 2
	}
	for i := range gates {
		close(gates[i])
	}
	done.Wait()
	fmt.Printf("calls=%d pairs=%d threads=%d\n", made, len(chosen), runtime.GOMAXPROCS(0))
}
