// headers: requests whose header values a probe uses as map keys. Each request gets an
// X-Id (four values, one longer than 16 bytes) and an X-Region (two values) and is
// handed to main.handle; the program counts what it sent and prints its own truth:
//
//	go id ID N            requests with X-Id ID
//	go pair ID REGION N   requests with X-Id ID and X-Region REGION
//
//	headers [ROUNDS]      each round sends 1 alpha, 2 beta, 3 of the long id, 4 d
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

//go:noinline
func handle(req *http.Request) int {
	return len(req.Header)
}

func main() {
	rounds := 1
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 0 {
			fmt.Fprintln(os.Stderr, "usage: headers [ROUNDS]")
			os.Exit(2)
		}
		rounds = n
	}
	ids := []string{"alpha", "beta", "gamma-a-longer-request-id", "d"}
	regions := []string{"eu-west", "us-east-1"}
	byID := map[string]int{}
	byPair := map[[2]string]int{}
	sent := 0
	for r := 0; r < rounds; r++ {
		for i, id := range ids {
			for j := 0; j <= i; j++ {
				region := regions[sent%len(regions)]
				sent++
				req, err := http.NewRequest("GET", "http://example.invalid/items", nil)
				if err != nil {
					panic(err)
				}
				req.Header.Set("X-Id", id)
				req.Header.Set("X-Region", region)
				req.Header.Set("Accept", "text/plain")
				handle(req)
				byID[id]++
				byPair[[2]string{id, region}]++
			}
		}
	}
	for id, n := range byID {
		fmt.Printf("go id %s %d\n", id, n)
	}
	for p, n := range byPair {
		fmt.Printf("go pair %s %s %d\n", p[0], p[1], n)
	}
}
