//go:build !go1.24

// Go 1.17 to 1.23: the runtime's hash functions, linknamed (the map types' hashers:
// memhash64, memhash32, memhash of 1 and 2 bytes, strhash). Go 1.23 refuses linknames
// to memhash32 and memhash64 (hash_int_old.go has them up to 1.22).

package main

import (
	"math/rand"
	"unsafe"
)

//go:linkname memhash runtime.memhash
func memhash(p unsafe.Pointer, h, s uintptr) uintptr

//go:linkname strhash runtime.strhash
func strhash(p unsafe.Pointer, h uintptr) uintptr

func hashInt(size int, v uint64, r *rand.Rand) (uint64, uint64, bool) {
	seed := r.Uint64()
	switch size {
	case 1, 2:
		return seed, uint64(memhash(unsafe.Pointer(&v), uintptr(seed), uintptr(size))), true
	}
	return hashWord(size, v, seed)
}

func hashString(s string, r *rand.Rand) (uint64, uint64) {
	seed := r.Uint64()
	return seed, uint64(strhash(unsafe.Pointer(&s), uintptr(seed)))
}
