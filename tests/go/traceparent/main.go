// traceparent: a net/http server on 127.0.0.1 and its client in one program, for
// gtrace's span() tests of the W3C traceparent header. It prints "ready", waits for a
// line on stdin (so the test can attach first), then sends requests: most with a
// traceparent header of ids it makes (random, sampled or not), some without one, one
// with a malformed one. The handler calls handle(id), which calls lookup(id). It prints
// one truth line per request (the id, the trace id and parent id sent, or "-"), then
// "---", and waits until stdin is closed.
//
//	traceparent [h2c]
//
// With h2c, the server and the client speak HTTP/2 without TLS (net/http's Protocols,
// Go 1.24 and later): every request is HTTP/2, which the truth says (`proto=2`). The
// truth also says how many writes the server made to its connections (`writes=N`):
// on HTTP/1, net/http's checkConnErrorWriter.Write makes each, after the handler
// returned (the response is flushed by finishRequest).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// writes counts the server's writes to its connections.
var writes atomic.Int64

// countingConn is a server connection that counts its writes (before each is made, so
// that a client that has read a response sees its write counted).
type countingConn struct{ net.Conn }

func (c countingConn) Write(p []byte) (int, error) {
	writes.Add(1)
	return c.Conn.Write(p)
}

type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c}, nil
}

var sink int

//go:noinline
func lookup(id int) int {
	time.Sleep(100 * time.Microsecond)
	sink += id
	return id * 2
}

//go:noinline
func handle(id int) error {
	if lookup(id) < 0 {
		return fmt.Errorf("no %d", id)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func main() {
	in := bufio.NewReader(os.Stdin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	h2c := len(os.Args) > 1 && os.Args[1] == "h2c"
	protos := new(http.Protocols)
	if h2c {
		protos.SetUnencryptedHTTP2(true)
	} else {
		protos.SetHTTP1(true)
	}
	proto := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/item", func(w http.ResponseWriter, r *http.Request) {
		proto = r.ProtoMajor
		id, _ := strconv.Atoi(r.URL.Query().Get("id"))
		if err := handle(id); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, Protocols: protos}
	go srv.Serve(countingListener{ln})
	fmt.Printf("ready pid=%d\n", os.Getpid())
	if _, err := in.ReadString('\n'); err != nil {
		return
	}
	client := &http.Client{Transport: &http.Transport{Protocols: protos}}
	for id := 1; id <= 20; id++ {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/item?id=%d", ln.Addr(), id), nil)
		trace, parent, kind := "-", "-", "none"
		switch {
		case id%5 == 0:
			// No header: gtrace starts a trace.
		case id == 7:
			// Malformed (upper-case hex): ignored, as W3C says.
			req.Header.Set("traceparent", "00-"+"4BF92F3577B34DA6A3CE929D0E0E4736"+"-"+"00F067AA0BA902B7"+"-01")
			kind = "malformed"
		default:
			trace, parent = randomHex(16), randomHex(8)
			flags := "01"
			if id%3 == 0 {
				flags = "00"
			}
			req.Header.Set("traceparent", "00-"+trace+"-"+parent+"-"+flags)
			kind = "sampled=" + flags
		}
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("truth-request: %d %s %s %s\n", id, trace, parent, kind)
	}
	// Every connection idle, so every write has returned (the last one's RET too).
	if err := srv.Shutdown(context.Background()); err != nil {
		panic(err)
	}
	fmt.Printf("truth: requests=20 proto=%d writes=%d\n", proto, writes.Load())
	fmt.Println("---")
	in.ReadString('\n')
}
