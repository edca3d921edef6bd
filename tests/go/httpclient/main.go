// httpclient: net/http clients against two local servers on 127.0.0.1 (ports the kernel
// picks) and one closed port, for the stdlib `httpclient` library's end-to-end test. It
// prints the hosts it used and its own truth as `key=value` lines.
//
//	httpclient N   N rounds; each round makes, through http.Client.Do/Get/Post:
//	               host a: GET /ok 3 times -> 200, GET /nope 1 time -> 404
//	               host b: POST /make 2 times -> 201,
//	                       GET /moved 1 time -> 302 to /ok, followed: one call, 200
//	               and once at the end: GET on a closed port (connection refused: an error)
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

func serve(mux *http.ServeMux) (host string, srv *http.Server) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	srv = &http.Server{Handler: mux}
	go srv.Serve(ln)
	return ln.Addr().String(), srv
}

func main() {
	rounds := 1
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n < 0 || n > 1000 {
			fmt.Fprintln(os.Stderr, "usage: httpclient N (0..1000)")
			os.Exit(2)
		}
		rounds = n
	}
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }

	muxA := http.NewServeMux()
	muxA.HandleFunc("/ok", ok)
	muxA.HandleFunc("/nope", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	hostA, srvA := serve(muxA)

	muxB := http.NewServeMux()
	muxB.HandleFunc("/ok", ok)
	muxB.HandleFunc("/make", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	})
	muxB.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusFound)
	})
	hostB, srvB := serve(muxB)

	// A port that was just free: connecting to it is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
	hostC := ln.Addr().String()
	ln.Close()

	client := &http.Client{Timeout: 10 * time.Second}
	counts := map[string]int{}
	check := func(name string, resp *http.Response, err error, want int) {
		if err != nil {
			fmt.Fprintln(os.Stderr, name, err)
			os.Exit(1)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			fmt.Fprintf(os.Stderr, "%s: status %d, want %d\n", name, resp.StatusCode, want)
			os.Exit(1)
		}
		counts[fmt.Sprintf("%s_%d", name, want)]++
	}
	for i := 0; i < rounds; i++ {
		for j := 0; j < 3; j++ {
			resp, err := client.Get("http://" + hostA + "/ok")
			check("a", resp, err, 200)
		}
		req, _ := http.NewRequest("GET", "http://"+hostA+"/nope", nil)
		resp, err := client.Do(req)
		check("a", resp, err, 404)
		for j := 0; j < 2; j++ {
			resp, err := client.Post("http://"+hostB+"/make", "text/plain", strings.NewReader("x"))
			check("b", resp, err, 201)
		}
		resp, err = client.Get("http://" + hostB + "/moved")
		check("b", resp, err, 200)
	}
	errors := 0
	if resp, err := client.Get("http://" + hostC + "/"); err == nil {
		resp.Body.Close()
		fmt.Fprintln(os.Stderr, "the closed port answered")
		os.Exit(1)
	} else {
		errors++
	}
	srvA.Close()
	srvB.Close()

	fmt.Printf("host_a=%s\nhost_b=%s\nhost_c=%s\n", hostA, hostB, hostC)
	for k, v := range counts {
		fmt.Printf("%s=%d\n", k, v)
	}
	fmt.Printf("c_errors=%d\n", errors)
}
