//go:build go1.24

// Go 1.24 on: maphash.Comparable hashes with the map type's own hasher and the seed's
// value (read from the Seed, whose one field it is).

package main

import (
	"hash/maphash"
	"math/rand"
	"unsafe"
)

func seedOf(s maphash.Seed) uint64 {
	return *(*uint64)(unsafe.Pointer(&s))
}

func hashInt(size int, v uint64, _ *rand.Rand) (uint64, uint64, bool) {
	s := maphash.MakeSeed()
	var h uint64
	switch size {
	case 1:
		h = maphash.Comparable(s, uint8(v))
	case 2:
		h = maphash.Comparable(s, uint16(v))
	case 4:
		h = maphash.Comparable(s, uint32(v))
	default:
		h = maphash.Comparable(s, v)
	}
	return seedOf(s), h, true
}

func hashString(str string, _ *rand.Rand) (uint64, uint64) {
	s := maphash.MakeSeed()
	return seedOf(s), maphash.Comparable(s, str)
}
