// benchserver: a third-party HTTP server (echo, github.com/labstack/echo/v4, from the Go
// module proxy) for the real-server benchmark (benches/perf/server.rs), and its load.
//
//	benchserver serve             listens on 127.0.0.1:0, prints "listening ADDR", serves
//	                              GET /hello (200) through echo until killed
//	benchserver load URL N C      N GET requests to URL over C keep-alive connections;
//	                              prints "done N" (exits 1 if any request failed)
//	benchserver pace URL R S C    R GET requests a second for S seconds over C keep-alive
//	                              connections, each sent at its time (an open loop: a
//	                              slower server gets no fewer); every 50 ms prints
//	                              "progress at_ns=T done=N late=L failed=F" (so far:
//	                              answered, sent over 10 ms after their time, failed)
//	                              and "paced N late L failed F" at the end
//
// The server's CPU time per request is read from /proc by the benchmark: the load runs
// in another process, so it does not count.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// hello is the handler: what "two empty uprobes" trace (its entry and its return).
//
//go:noinline
func hello(c echo.Context) error { return c.String(http.StatusOK, "hello\n") }

func serve() {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/hello", hello)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	e.Listener = ln
	if err := e.Start(""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func load(url string, n, conns int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		fmt.Fprintf(os.Stderr, "%d requests failed\n", failed.Load())
		os.Exit(1)
	}
	fmt.Printf("done %d\n", n)
}

// loadWindows sends requests from `conns` connections for `secs` seconds and prints, for
// every 100 ms, how many were answered in it: `window at_ns=T requests=N`.
func loadWindows(url string, secs, conns int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	var done atomic.Int64
	stop := time.Now().Add(time.Duration(secs) * time.Second)
	for i := 0; i < conns; i++ {
		go func() {
			for time.Now().Before(stop) {
				resp, err := client.Get(url)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				done.Add(1)
			}
		}()
	}
	last := int64(0)
	for tick := time.NewTicker(100 * time.Millisecond); time.Now().Before(stop); {
		t := <-tick.C
		n := done.Load()
		fmt.Printf("window at_ns=%d requests=%d\n", t.UnixNano(), n-last)
		last = n
	}
}

// pace sends `rate` requests a second for `secs` seconds, request i at start + i/rate
// (connection i % conns), whatever the server's speed: its CPU a second is then its
// cost a request times a fixed rate. A connection that falls behind sends at once.
// Each connection writes one fixed HTTP/1.1 GET and reads its response by hand (Go's
// client spent about 60 us of CPU a request here, as much as the server).
func pace(url string, rate, secs, conns int) {
	hostPath := strings.TrimPrefix(url, "http://")
	host, path := hostPath, "/"
	if i := strings.IndexByte(hostPath, '/'); i >= 0 {
		host, path = hostPath[:i], hostPath[i:]
	}
	request := []byte("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
	var late, failed, sent atomic.Int64
	total := rate * secs
	interval := time.Second / time.Duration(rate)
	start := time.Now().Add(50 * time.Millisecond)
	var done atomic.Int64
	go func() {
		for t := range time.Tick(50 * time.Millisecond) {
			fmt.Printf("progress at_ns=%d done=%d late=%d failed=%d\n", t.UnixNano(), done.Load(), late.Load(), failed.Load())
		}
	}()
	var wg sync.WaitGroup
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var conn net.Conn
			var r *bufio.Reader
			for i := c; i < total; i += conns {
				at := start.Add(time.Duration(i) * interval)
				if wait := time.Until(at); wait > 0 {
					time.Sleep(wait)
				} else if wait < -10*time.Millisecond {
					late.Add(1)
				}
				sent.Add(1)
				if conn == nil {
					var err error
					if conn, err = net.Dial("tcp", host); err != nil {
						failed.Add(1)
						continue
					}
					r = bufio.NewReader(conn)
				}
				if _, err := conn.Write(request); err != nil || !readResponse(r) {
					failed.Add(1)
					conn.Close()
					conn = nil
				} else {
					done.Add(1)
				}
			}
			if conn != nil {
				conn.Close()
			}
		}(c)
	}
	wg.Wait()
	fmt.Printf("paced %d late %d failed %d\n", sent.Load(), late.Load(), failed.Load())
}

// readResponse reads one HTTP/1.1 response with a Content-Length; false unless a 200.
func readResponse(r *bufio.Reader) bool {
	status, err := r.ReadString('\n')
	if err != nil {
		return false
	}
	length := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if _, err := r.Discard(length); err != nil {
		return false
	}
	return strings.Contains(status, " 200 ")
}

func main() {
	if len(os.Args) == 6 && os.Args[1] == "pace" {
		r, err1 := strconv.Atoi(os.Args[3])
		s, err2 := strconv.Atoi(os.Args[4])
		c, err3 := strconv.Atoi(os.Args[5])
		if err1 == nil && err2 == nil && err3 == nil && r > 0 && s > 0 && c > 0 {
			pace(os.Args[2], r, s, c)
			return
		}
	}
	if len(os.Args) == 5 && os.Args[1] == "load-windows" {
		secs, err1 := strconv.Atoi(os.Args[3])
		c, err2 := strconv.Atoi(os.Args[4])
		if err1 == nil && err2 == nil && secs > 0 && c > 0 {
			loadWindows(os.Args[2], secs, c)
			return
		}
	}
	if len(os.Args) >= 2 && os.Args[1] == "serve" {
		serve()
		return
	}
	if len(os.Args) == 5 && os.Args[1] == "load" {
		n, err1 := strconv.Atoi(os.Args[3])
		c, err2 := strconv.Atoi(os.Args[4])
		if err1 == nil && err2 == nil && n > 0 && c > 0 {
			load(os.Args[2], n, c)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "usage: benchserver serve | load URL N C | load-windows URL SECONDS C | pace URL RATE SECONDS C")
	os.Exit(2)
}
