// globals: package-level variables of every kind (int, string, float, struct, pointer,
// map, slice, a standard library's), changed while the program runs; each step calls
// main.tick, where gtrace reads them, and prints the values it set with fmt, so the test
// (tests/globals.rs) compares gtrace's reads with the program's own truth. It ends with
// runtime.ReadMemStats and a call of main.heap, where the runtime's heap counter is read.
//
//	globals [N [slow]]    N ticks (5), each 10ms apart when slow
package main

import (
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"time"
)

type Config struct {
	Port    int
	Name    string
	Ratio   float64
	Limits  *Limits
	Enabled bool
}

type Limits struct {
	Max  int32
	Tags []string
}

var (
	counter int64
	label   = "start"
	config  = Config{Port: 8080, Name: "acc", Ratio: 0.5, Limits: &Limits{Max: 3}}
	current *Config
	byName  = map[string]int{}
	byID    = map[int]string{}
	items   []int
	ratio32 float32 = 0.25
)

//go:noinline
func tick(step int) int { return step }

//go:noinline
func heap(alloc uint64) uint64 { return alloc }

var sink [][]byte

func main() {
	steps := 5
	if len(os.Args) > 1 {
		steps, _ = strconv.Atoi(os.Args[1])
	}
	// `globals N slow`: a tick every 10ms, for tracing a process already running.
	slow := len(os.Args) > 2 && os.Args[2] == "slow"
	http.DefaultClient.Timeout = 7 * time.Second
	for i := 0; i < steps; i++ {
		counter += int64(i * 10)
		label = "step" + strconv.Itoa(i)
		config.Port = 8080 + i
		config.Limits.Max = int32(i * 3)
		config.Limits.Tags = append(config.Limits.Tags, "t"+strconv.Itoa(i))
		byName["k"+strconv.Itoa(i)] = i * 100
		byID[i] = "v" + strconv.Itoa(i)
		items = append(items, i*i)
		if i%2 == 1 {
			current = &config
		} else {
			current = nil
		}
		ratio32 = float32(i) / 4
		fmt.Printf("go tick %d counter=%d label=%s port=%d max=%d tags=%d current=%t byname=%d byid=%d items=%d last=%d ratio=%v timeout=%d\n",
			i, counter, label, config.Port, config.Limits.Max, len(config.Limits.Tags), current != nil,
			len(byName), len(byID), len(items), items[len(items)-1], ratio32, http.DefaultClient.Timeout)
		tick(i)
		if slow {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := 0; i < 50; i++ {
		sink = append(sink, make([]byte, 64<<10))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("go heap alloc=%d\n", ms.HeapAlloc)
	heap(ms.HeapAlloc)
	fmt.Println(len(sink))
}
