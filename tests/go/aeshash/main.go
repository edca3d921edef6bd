// Command aeshash prints its runtime's map hash keys (aeskeysched, read at the link-time
// address its own symbol table gives) and the hashes its runtime computes for integer
// keys of 1, 2, 4 and 8 bytes and for byte strings of 0 to 128 bytes, each with a seed,
// one line each:
//
//	keysched HEX
//	aes 0|1
//	int SIZE SEED VALUE HASH
//	bytes SEED HEX|- HASH
//
// tests/aeshash.rs computes the same with gtrace's eBPF hash and compares. The hashes
// come from the runtime's own functions: through maphash.Comparable (the map type's
// hasher, Go 1.24 on) or linknamed (older releases; see hash_*.go).
package main

import (
	"debug/elf"
	"encoding/hex"
	"fmt"
	"math/rand"
	"os"
	"unsafe"
)

func main() {
	keysched, ok := global([]string{"runtime.aeskeysched", "internal/runtime/maps.aeskeysched"}, 128)
	if !ok {
		fmt.Fprintln(os.Stderr, "no aeskeysched in the symbol table")
		os.Exit(1)
	}
	flag, ok := global([]string{"runtime.useAeshash", "internal/runtime/maps.UseAeshash"}, 1)
	if !ok {
		fmt.Fprintln(os.Stderr, "no useAeshash in the symbol table")
		os.Exit(1)
	}
	fmt.Printf("keysched %s\naes %d\n", hex.EncodeToString(keysched), flag[0])
	r := rand.New(rand.NewSource(1))
	values := []uint64{0, 1, 0x7f, 0xff, 0x1234, 0x8000_0000, 0xdead_beef, 1<<40 | 7, ^uint64(0)}
	for i := 0; i < 8; i++ {
		values = append(values, r.Uint64())
	}
	for _, size := range []int{1, 2, 4, 8} {
		for _, v := range values {
			v &= ^uint64(0) >> (64 - 8*size)
			if seed, h, ok := hashInt(size, v, r); ok {
				fmt.Printf("int %d %d %d %d\n", size, seed, v, h)
			}
		}
	}
	lengths := []int{}
	for n := 0; n <= 40; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 47, 48, 49, 63, 64, 65, 96, 127, 128)
	for _, n := range lengths {
		for rep := 0; rep < 2; rep++ {
			b := make([]byte, n)
			r.Read(b)
			seed, h := hashString(string(b), r)
			text := hex.EncodeToString(b)
			if n == 0 {
				text = "-"
			}
			fmt.Printf("bytes %d %s %d\n", seed, text, h)
		}
	}
}

// global reads size bytes of the first of names in this program's own symbol table,
// at its link-time address (the program is not a PIE).
func global(names []string, size int) ([]byte, bool) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, false
	}
	for _, name := range names {
		for _, s := range syms {
			if s.Name == name {
				p := unsafe.Pointer(uintptr(s.Value))
				out := make([]byte, size)
				copy(out, (*[128]byte)(p)[:size])
				return out, true
			}
		}
	}
	return nil, false
}
