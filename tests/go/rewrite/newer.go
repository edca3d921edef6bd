//go:build newer

package main

import (
	"fmt"
	"sort"
	"strings"
)

const build = "newer"

// extra does more, in more code, so that every function after it in the binary moves.
//
//go:noinline
func extra(i int) int {
	words := strings.Fields(strings.Repeat(fmt.Sprintf("w%d ", i), i%7+1))
	sort.Strings(words)
	return i*7 + len(strings.Join(words, ","))
}
