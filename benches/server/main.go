// benchserver: a third-party HTTP server (echo, github.com/labstack/echo/v4, from the Go
// module proxy) for the real-server benchmark (benches/perf/server.rs), and its load.
//
//	benchserver serve             listens on 127.0.0.1:0, prints "listening ADDR", serves
//	                              GET /hello (200) through echo until killed
//	benchserver load URL N C      N GET requests to URL over C keep-alive connections;
//	                              prints "done N" (exits 1 if any request failed)
//
// The server's CPU time per request is read from /proc by the benchmark: the load runs
// in another process, so it does not count.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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

func main() {
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
	fmt.Fprintln(os.Stderr, "usage: benchserver serve | load URL N C | load-windows URL SECONDS C")
	os.Exit(2)
}
