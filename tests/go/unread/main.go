// unread: a pointer that points at memory no one may read. inspect is called with a
// pointer into a page mapped PROT_NONE (the program never reads through it; a probe
// that does fails), with a good pointer, and with nil; look only ever with good
// pointers and nil. The program prints how many of each call it made as `key=value`.
package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

type Point struct {
	X    int64
	Name string
}

// inspect keeps its pointer: it never reads through it.
//
//go:noinline
func inspect(p *Point) uintptr { return uintptr(unsafe.Pointer(p)) }

//go:noinline
func look(p *Point) uintptr { return uintptr(unsafe.Pointer(p)) }

func main() {
	region, err := syscall.Mmap(-1, 0, 4096, syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mmap:", err)
		os.Exit(1)
	}
	unreadable := (*Point)(unsafe.Pointer(&region[0]))
	good := &Point{X: 7, Name: "ok"}
	var kept uintptr
	bad, fine, nils, sumx := 0, 0, 0, int64(0)
	for i := 0; i < 40; i++ {
		switch i % 4 {
		case 0, 1:
			kept += inspect(unreadable)
			bad++
		case 2:
			kept += inspect(good)
			kept += look(good)
			fine++
			sumx += good.X
		default:
			kept += inspect(nil)
			kept += look(nil)
			nils++
		}
	}
	fmt.Printf("bad=%d good=%d nil=%d sumx=%d calls=%d kept=%d\n", bad, fine, nils, sumx, bad+fine+nils, kept%2)
}
