// otelsdk: a program instrumented with the OpenTelemetry Go SDK (go.opentelemetry.io/otel,
// from the Go module proxy), for gtrace's span() tests. It prints "ready", waits for a
// line on stdin (so the test can attach first), then for each of its requests starts an
// SDK span and calls work(ctx, id) with a context that holds it under other contexts
// (a value, a cancel, a deadline: the chain gtrace walks); work calls step(ctx, id), in
// half of the requests with a context holding an SDK span of its own. One more request
// is made under a span context from another process (what a propagator extracts from
// headers: ContextWithRemoteSpanContext, IsRemote), and one under no span. It prints one
// truth line per call of work and step (the function, the id, the trace id and span id
// of the SDK span in its context, and whether that span context is remote), then "---",
// and waits until stdin is closed.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

type key string

var tracer trace.Tracer

func record(fn string, ctx context.Context, id int) {
	sc := trace.SpanContextFromContext(ctx)
	fmt.Printf("truth-call: %s %d %s %s %t\n", fn, id, sc.TraceID(), sc.SpanID(), sc.IsRemote())
}

//go:noinline
func step(ctx context.Context, id int) int {
	record("main.step", ctx, id)
	time.Sleep(100 * time.Microsecond)
	return id + len(ctx.Value(key("user")).(string))
}

//go:noinline
func work(ctx context.Context, id int) int {
	record("main.work", ctx, id)
	if id%2 == 0 {
		inner, span := tracer.Start(ctx, "sdk-inner")
		defer span.End()
		return step(inner, id)
	}
	return step(ctx, id)
}

func main() {
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	tracer = provider.Tracer("otelsdk")
	in := bufio.NewReader(os.Stdin)
	fmt.Printf("ready pid=%d\n", os.Getpid())
	if _, err := in.ReadString('\n'); err != nil {
		return
	}
	const requests = 10
	for id := 1; id <= requests; id++ {
		ctx, span := tracer.Start(context.Background(), "request")
		ctx = context.WithValue(ctx, key("user"), fmt.Sprintf("user%d", id))
		ctx, cancel := context.WithCancel(ctx)
		ctx, stop := context.WithTimeout(ctx, time.Minute)
		work(ctx, id)
		stop()
		cancel()
		span.End()
	}
	// Under another process's span context: the SDK's remote parent.
	var tid trace.TraceID
	var sid trace.SpanID
	rand.Read(tid[:])
	rand.Read(sid[:])
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	rctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	work(context.WithValue(rctx, key("user"), "remote"), requests+1)
	// Without any SDK span: gtrace starts a trace.
	work(context.WithValue(context.Background(), key("user"), "nobody"), 0)
	fmt.Printf("truth: requests=%d remote=1 sdk_spans=%d\n", requests, len(exporter.GetSpans()))
	fmt.Println("---")
	in.ReadString('\n')
}
