// kafkaprog: a Kafka producer and consumer (github.com/segmentio/kafka-go) against a
// real Kafka-protocol broker in the same process (github.com/twmb/franz-go/pkg/kfake:
// franz-go's in-memory cluster, which speaks Kafka's wire protocol on a TCP port; there
// is no Kafka in Debian and none can be downloaded here), for tests/kafka.rs. Both
// from the Go module proxy (the go.mod and go.sum under mods/VERSION).
//
//	kafkaprog ROUNDS
//
// Each round writes messages of several sizes to two topics (each write a batch of
// 1 to 4 messages, one Writer a topic), then a Reader a topic reads every message
// written so far. The program prints its own truth, from kafka-go's own statistics
// (Writer.Stats, Reader.Stats), one `key=value` a line:
//
//	produced|TOPIC=N          messages written (WriteMessages returned no error)
//	produce_errors|TOPIC=N    messages whose write failed (one write, refused by the
//	                          broker on purpose: MESSAGE_TOO_LARGE)
//	produced_bytes|TOPIC=B    the bytes of both as kafka-go counts them (WriterStats.Bytes)
//	batches|TOPIC=N           produce requests (WriterStats.Writes)
//	batch_errors|TOPIC=N      produce requests that failed (WriterStats.Errors)
//	consumed|TOPIC=N          messages the reader fetched (ReaderStats.Messages)
//	consumed_bytes|TOPIC=B    their keys' and values' bytes (ReaderStats.Bytes)
//	fetches|TOPIC=N           fetch requests (ReaderStats.Fetches)
//	read|TOPIC=N              messages the program read (ReadMessage)
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var topics = []string{"orders", "payments"}

// refuseNextProduce makes the broker answer the next produce request with
// MESSAGE_TOO_LARGE for every partition in it (a control function of kfake, run once).
func refuseNextProduce(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.MessageTooLarge.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
}

func main() {
	rounds := 3
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	addrs := cluster.ListenAddrs()
	truth := map[string]int64{}

	writers := map[string]*kafka.Writer{}
	readers := map[string]*kafka.Reader{}
	for _, t := range topics {
		writers[t] = &kafka.Writer{
			Addr:         kafka.TCP(addrs...),
			Topic:        t,
			BatchTimeout: time.Millisecond,
			RequiredAcks: kafka.RequireOne,
			MaxAttempts:  1,
		}
		readers[t] = kafka.NewReader(kafka.ReaderConfig{
			Brokers:  addrs,
			Topic:    t,
			MaxWait:  50 * time.Millisecond,
			MinBytes: 1,
			MaxBytes: 1 << 20,
		})
	}
	// Give the tracer time to attach before the first write.
	time.Sleep(50 * time.Millisecond)
	ctx := context.Background()
	written := map[string]int{}
	for round := 0; round < rounds; round++ {
		for ti, t := range topics {
			for w := 0; w < 3+ti; w++ {
				n := 1 + (round+w)%4
				msgs := make([]kafka.Message, n)
				for i := range msgs {
					msgs[i] = kafka.Message{
						Key:   []byte(fmt.Sprintf("k%d", i)),
						Value: []byte(strings.Repeat("v", 10*(1+i+w+round*7))),
					}
				}
				// In round 1 the broker refuses the payments' first write (MESSAGE_TOO_LARGE,
				// which kafka-go does not retry).
				refuse := round == 1 && w == 0 && t == "payments"
				if refuse {
					refuseNextProduce(cluster)
				}
				err := writers[t].WriteMessages(ctx, msgs...)
				if refuse != (err != nil) {
					panic(fmt.Sprintf("write %d of %s in round %d: %v", w, t, round, err))
				}
				if err != nil {
					truth["produce_errors|"+t] += int64(n)
					continue
				}
				truth["produced|"+t] += int64(n)
				written[t] += n
			}
		}
		for _, t := range topics {
			for truth["read|"+t] < int64(written[t]) {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if _, err := readers[t].ReadMessage(rctx); err != nil {
					panic(err)
				}
				cancel()
				truth["read|"+t]++
			}
		}
	}
	for _, t := range topics {
		writers[t].Close()
		readers[t].Close()
		ws := writers[t].Stats()
		if ws.Messages != truth["produced|"+t]+truth["produce_errors|"+t] {
			panic(fmt.Sprintf("%s: kafka-go counts %d messages written", t, ws.Messages))
		}
		truth["produced_bytes|"+t] = ws.Bytes
		truth["batches|"+t] = ws.Writes
		truth["batch_errors|"+t] = ws.Errors
		rs := readers[t].Stats()
		truth["consumed|"+t] = rs.Messages
		truth["consumed_bytes|"+t] = rs.Bytes
		truth["fetches|"+t] = rs.Fetches
	}
	keys := make([]string, 0, len(truth))
	for k := range truth {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s=%d\n", k, truth[k])
	}
}
