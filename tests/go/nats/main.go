// A NATS message broker (github.com/nats-io/nats-server/v2, from the Go module proxy)
// embedded in this process, and a NATS client (github.com/nats-io/nats.go) publishing N
// messages to a subject it also subscribes to: a third-party program of another kind
// than a web server, traced by gtrace. It prints its own truth: the server's counters
// (Varz) and the runtime's GC count, as key=value.
//
//	nats N
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fail(err)
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		fail(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		fail(fmt.Errorf("the server did not start"))
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		fail(err)
	}
	sub, err := nc.SubscribeSync("gtrace.test")
	if err != nil {
		fail(err)
	}
	for i := 0; i < n; i++ {
		if err := nc.Publish("gtrace.test", []byte("message "+strconv.Itoa(i))); err != nil {
			fail(err)
		}
	}
	if err := nc.Flush(); err != nil {
		fail(err)
	}
	received := 0
	for received < n {
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			fail(err)
		}
		received++
	}
	nc.Close()
	runtime.GC()
	v, err := s.Varz(nil)
	if err != nil {
		fail(err)
	}
	s.Shutdown()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("in_msgs=%d in_bytes=%d out_msgs=%d received=%d num_gc=%d\n",
		v.InMsgs, v.InBytes, v.OutMsgs, received, ms.NumGC)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nats:", err)
	os.Exit(1)
}
