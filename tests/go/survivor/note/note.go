// Package note holds what main.request and main.step call, outside package main: a wildcard over
// main's functions ("main.*") does not probe it.
package note

// Add adds one to *n.
//
//go:noinline
func Add(n *int) { *n++ }

// Mix is one round of FNV-1a.
//
//go:noinline
func Mix(h uint64, i int) uint64 { return (h ^ uint64(i)) * 1099511628211 }
