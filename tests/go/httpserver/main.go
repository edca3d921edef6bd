// httpserver: a net/http server on 127.0.0.1 (a port the kernel picks) driven by a real
// net/http client in the same program, for the stdlib `http` library's end-to-end test.
// Every request is made, and its status checked, before the program prints its own
// truth as `key=value` lines and exits.
//
//	httpserver N     N rounds; each round makes
//	                 GET /hello 3 times       -> 200
//	                 GET /missing 1 time      -> 404 (explicit WriteHeader)
//	                 POST /items 2 times      -> 201
//	                 GET /fail 1 time         -> 500 (http.Error)
//	                 GET /implicit 1 time     -> 200 (no WriteHeader: Write implies it)
//	                 and finally GET /slow once (sleeps 150ms, 200)
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	rounds := 1
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 0 || n > 1000 {
			fmt.Fprintln(os.Stderr, "usage: httpserver N (0..1000)")
			os.Exit(2)
		}
		rounds = n
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "hello\n")
	})
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	})
	mux.HandleFunc("POST /items", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "failed", http.StatusInternalServerError)
	})
	mux.HandleFunc("GET /implicit", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "no WriteHeader\n")
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	client := &http.Client{Timeout: 10 * time.Second}
	counts := map[string]int{}
	do := func(method, path string, want int) {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("item")
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			fmt.Fprintln(os.Stderr, "request:", err)
			os.Exit(1)
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, method, path, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			fmt.Fprintf(os.Stderr, "%s %s: status %d, want %d\n", method, path, resp.StatusCode, want)
			os.Exit(1)
		}
		counts[fmt.Sprintf("%s_%s_%d", method, strings.TrimPrefix(path, "/"), want)]++
	}
	for i := 0; i < rounds; i++ {
		for j := 0; j < 3; j++ {
			do("GET", "/hello", 200)
		}
		do("GET", "/missing", 404)
		do("POST", "/items", 201)
		do("POST", "/items", 201)
		do("GET", "/fail", 500)
		do("GET", "/implicit", 200)
	}
	do("GET", "/slow", 200)
	srv.Close()

	total := 0
	for k, v := range counts {
		fmt.Printf("%s=%d\n", k, v)
		total += v
	}
	fmt.Printf("requests=%d\n", total)
}
