//go:build !newer

package main

const build = "older"

//go:noinline
func extra(i int) int { return i * 3 }
