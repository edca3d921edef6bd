// gomaps builds Go maps with integer and string keys (small ones in one bucket or group,
// big ones with many buckets, overflow chains and several swiss tables, one growing while
// it is read, maps of 10 to a million entries, string keys of every length class the
// runtime hashes apart) and looks keys up in them through //go:noinline functions that
// gtrace probes. Each lookup prints its own truth in the line gtrace's script prints:
// `go int TAG KEY VALUE`, `go str TAG KEY VALUE`, ... (the zero value when the key is
// absent).
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

type point struct {
	X, Y int
}

//go:noinline
func lookupInt(tag string, m map[int]int, k int) int {
	v := m[k]
	fmt.Printf("go int %s %d %d\n", tag, k, v)
	return v
}

//go:noinline
func lookupStr(tag string, m map[string]int, k string) int {
	v := m[k]
	fmt.Printf("go str %s %s %d\n", tag, k, v)
	return v
}

// lookupKeyLen prints the key's length (long keys would not fit a printed line).
//
//go:noinline
func lookupKeyLen(tag string, m map[string]int, k string) int {
	v := m[k]
	fmt.Printf("go keylen %s %d %d\n", tag, len(k), v)
	return v
}

//go:noinline
func lookupStrStr(tag string, m map[string]string, k string) string {
	v := m[k]
	fmt.Printf("go strstr %s %s %s\n", tag, k, v)
	return v
}

//go:noinline
func lookupSmall(tag string, m map[int32]int16, k int32) int16 {
	v := m[k]
	fmt.Printf("go small %s %d %d\n", tag, k, v)
	return v
}

//go:noinline
func lookupByte(tag string, m map[uint8]uint64, k uint8) uint64 {
	v := m[k]
	fmt.Printf("go byte %s %d %d\n", tag, k, v)
	return v
}

//go:noinline
func lookupPoint(tag string, m map[int64]point, k int64) int {
	v := m[k]
	fmt.Printf("go point %s %d %d\n", tag, k, v.Y)
	return v.Y
}

//go:noinline
func lookupLen(tag string, m map[int]int) int {
	fmt.Printf("go len %s %d\n", tag, len(m))
	return len(m)
}

//go:noinline
func lookupByPoint(m map[point]int, k point) int {
	fmt.Printf("go bypoint %d\n", m[k])
	return m[k]
}

type holder struct {
	Name  string
	Count map[string]int
}

//go:noinline
func show(tag string, a map[string]int, b map[int8]string, h holder, n map[int]int) {
	fmt.Printf("go show %s %v %v %+v %v\n", tag, a, b, h, n)
	fmt.Printf("go sharp %s %#v %#v\n", tag, a, b)
}

//go:noinline
func showBig(m map[int]int) {
	fmt.Printf("go big %v\n", m)
}

func intMap(n int) map[int]int {
	m := map[int]int{}
	for i := 0; i < n; i++ {
		m[i*7-3] = i*i + 1
	}
	return m
}

func strMap(n int) map[string]int {
	m := map[string]int{}
	for i := 0; i < n; i++ {
		m["key-"+strconv.Itoa(i*3)] = i + 100
	}
	return m
}

func main() {
	big := 1000
	if len(os.Args) > 1 {
		big, _ = strconv.Atoi(os.Args[1])
	}
	var nilMap map[int]int
	lookupInt("nil", nilMap, 4)
	lookupInt("empty", map[int]int{}, 4)
	small := intMap(5)
	for _, k := range []int{-3, 4, 25, 5, 1000, 0} {
		lookupInt("small", small, k)
	}
	bigInt := intMap(big)
	for _, k := range []int{-3, 697, 7*(big-1) - 3, 7*(big/2) - 3, 2, -10, 7 * big} {
		lookupInt("big", bigInt, k)
	}
	smallStr := strMap(6)
	for _, k := range []string{"key-0", "key-15", "key-3", "key-", "key-1", "", "key-150"} {
		lookupStr("small", smallStr, k)
	}
	bigStr := strMap(big)
	for _, k := range []string{"key-0", "key-3", strconv.Itoa(5), "key-" + strconv.Itoa(3*(big-1)), "key-" + strconv.Itoa(3*big), "key-600"} {
		lookupStr("big", bigStr, k)
	}
	// Long keys: equal lengths, differing at the end.
	long := map[string]string{}
	prefix := "a-rather-long-key-that-spans-several-words-of-eight-bytes-"
	for i := 0; i < 40; i++ {
		long[prefix+strconv.Itoa(i)] = "value " + strconv.Itoa(i)
	}
	for _, k := range []string{prefix + "0", prefix + "39", prefix + "40", prefix + "17", prefix[:10]} {
		lookupStrStr("long", long, k)
	}
	// String keys of 0 to 140 bytes (the hash's length classes: 0, 1-16, 17-32, 33-64,
	// 65-128, longer), every other length present.
	lens := map[string]int{}
	for n := 0; n <= 140; n += 2 {
		lens[strings.Repeat("k", n)] = n + 1
	}
	for _, n := range []int{0, 1, 2, 15, 16, 17, 18, 31, 32, 33, 34, 63, 64, 65, 66, 100, 127, 128} {
		lookupKeyLen("lens", lens, strings.Repeat("k", n))
	}
	// Longer than gtrace hashes: skipped, counted.
	for _, n := range []int{129, 130, 140} {
		lookupKeyLen("toolong", lens, strings.Repeat("k", n))
	}
	sm := map[int32]int16{}
	for i := int32(-50); i < 50; i++ {
		sm[i*1000] = int16(i * 3)
	}
	for _, k := range []int32{-50000, 49000, 0, 1, -1000} {
		lookupSmall("sized", sm, k)
	}
	bm := map[uint8]uint64{}
	for i := 0; i < 256; i += 2 {
		bm[uint8(i)] = uint64(i) << 40
	}
	for _, k := range []uint8{0, 254, 255, 128, 3} {
		lookupByte("sized", bm, k)
	}
	pm := map[int64]point{}
	for i := int64(0); i < 30; i++ {
		pm[i<<33] = point{X: int(i), Y: int(i * 11)}
	}
	for _, k := range []int64{0, 29 << 33, 5 << 33, 5} {
		lookupPoint("struct", pm, k)
	}
	// A map growing while it is read: in the bucket layout, lookups between inserts see
	// the old buckets while they are evacuated.
	growing := map[int]int{}
	for i := 0; i < 3000; i++ {
		growing[i] = i + 1
		if i%97 == 0 {
			lookupInt("growing", growing, i/2)
			lookupInt("growing", growing, i+1)
			lookupLen("growing", growing)
		}
	}
	// Maps of every size up to a million entries: keys present and absent (a scan of
	// the map could not tell an absent key in the bigger ones).
	for _, n := range []int{10, 1000, 100000, 1000000} {
		tag := "n" + strconv.Itoa(n)
		im := intMap(n)
		for _, k := range []int{-3, 7*(n-1) - 3, 7*(n/2) - 3, 2, 7 * n, -10} {
			lookupInt(tag, im, k)
		}
		sm := strMap(n)
		for _, k := range []string{"key-0", "key-" + strconv.Itoa(3*(n-1)), "key-" + strconv.Itoa(3*(n/3)), "key-1", "key-" + strconv.Itoa(3*n), ""} {
			lookupStr(tag, sm, k)
		}
	}
	show("small", map[string]int{"b": 2, "a": 1, "c": -3}, map[int8]string{-5: "minus", 7: "seven", 0: ""},
		holder{Name: "h", Count: map[string]int{"x": 10}}, nil)
	show("empty", map[string]int{}, nil, holder{}, map[int]int{})
	showBig(intMap(300))
	lookupByPoint(map[point]int{{1, 2}: 3}, point{1, 2})
	// Deleted entries (tombstones in a swiss table, emptyOne in a bucket).
	for i := 0; i < 5; i++ {
		delete(small, i*7-3)
		lookupInt("deleted", small, i*7-3)
		lookupInt("deleted", small, 7*4-3)
	}
}
