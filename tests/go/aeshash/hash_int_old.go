//go:build !go1.23

package main

import "unsafe"

//go:linkname memhash32 runtime.memhash32
func memhash32(p unsafe.Pointer, h uintptr) uintptr

//go:linkname memhash64 runtime.memhash64
func memhash64(p unsafe.Pointer, h uintptr) uintptr

func hashWord(size int, v uint64, seed uint64) (uint64, uint64, bool) {
	if size == 4 {
		return seed, uint64(memhash32(unsafe.Pointer(&v), uintptr(seed))), true
	}
	return seed, uint64(memhash64(unsafe.Pointer(&v), uintptr(seed))), true
}
