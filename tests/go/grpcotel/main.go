// grpcotel: a gRPC client instrumented with the OpenTelemetry Go SDK
// (go.opentelemetry.io/otel from the Go module proxy) and its server in one process
// (google.golang.org/grpc's interop TestService), for tests/grpc_otel.rs: `gtrace grpc
// --otlp` must make each client call's span a child of the SDK span the call was made
// under. The test builds it once per grpc-go version (the go.mod and go.sum under
// mods/VERSION).
//
//	grpcotel
//
// It makes unary and streaming calls: most under an SDK span of their own (a root
// span, or a child of one; sampled, or once not), under contexts of their own too (a
// value, a deadline), one under a span context from another process (what a propagator
// extracts from headers: ContextWithRemoteSpanContext), and some under none. It prints
// its truth, one line a call:
//
//	truth-call: N METHOD TRACE SPAN SAMPLED REMOTE   the SDK span the call was made under
//	truth-call: N METHOD - - - -                     a call under no SDK span
//
// then `truth: calls=N`.
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

const svc = "/grpc.testing.TestService/"

type server struct {
	testpb.UnimplementedTestServiceServer
}

func (server) EmptyCall(ctx context.Context, in *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (server) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
	for range 2 {
		if err := s.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return nil
}

type key string

var calls int

// record prints the SDK span in ctx that call number `calls` is made under.
func record(ctx context.Context, method string) {
	calls++
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		fmt.Printf("truth-call: %d %s - - - -\n", calls, method)
		return
	}
	fmt.Printf("truth-call: %d %s %s %s %t %t\n", calls, method, sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote())
}

func unary(c testpb.TestServiceClient, ctx context.Context) {
	record(ctx, svc+"EmptyCall")
	if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
		panic(err)
	}
}

func streaming(c testpb.TestServiceClient, ctx context.Context) {
	record(ctx, svc+"StreamingOutputCall")
	s, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		panic(err)
	}
	for {
		if _, err := s.Recv(); err == io.EOF {
			break
		} else if err != nil {
			panic(err)
		}
	}
}

func main() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, server{})
	go srv.Serve(lis)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	c := testpb.NewTestServiceClient(cc)
	exporter := tracetest.NewInMemoryExporter()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter)).Tracer("grpcotel")
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("grpcotel")
	// Give the tracer time to attach before the first call (gtrace -c attaches before
	// the program runs main, but a margin costs nothing).
	time.Sleep(50 * time.Millisecond)
	bg := context.Background()
	for i := range 3 {
		// Under no SDK span.
		unary(c, bg)
		// Under a root SDK span, with a value and a deadline below it.
		ctx, span := tracer.Start(bg, "request")
		ctx = context.WithValue(ctx, key("user"), fmt.Sprint(i))
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		unary(c, dctx)
		streaming(c, dctx)
		cancel()
		// Under a child of it.
		inner, child := tracer.Start(ctx, "inner")
		unary(c, inner)
		child.End()
		span.End()
	}
	// Under another process's span context (IsRemote): a remote parent.
	var tid trace.TraceID
	var sid trace.SpanID
	rand.Read(tid[:])
	rand.Read(sid[:])
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	unary(c, trace.ContextWithRemoteSpanContext(bg, remote))
	// Under a span the SDK does not sample: its trace is not sent.
	ctx, span := never.Start(bg, "unsampled")
	unary(c, ctx)
	span.End()
	streaming(c, bg)
	cc.Close()
	srv.Stop()
	fmt.Printf("truth: calls=%d\n", calls)
}
