// grpcprog: a real gRPC server and its client in one process (google.golang.org/grpc
// from the Go module proxy, its interop TestService), for tests/grpc.rs. The test
// builds it once per grpc-go version (the go.mod and go.sum under mods/VERSION).
//
//	grpcprog ROUNDS
//
// Each round makes unary, server-streaming, client-streaming and bidirectional calls,
// some ending in an error code the server's handler returns, one call to a method the
// server does not have (Unimplemented, from grpc's own server) and one that the
// client's deadline ends (DeadlineExceeded), and a stream to a method the server does
// not have, which the client never writes to. The program prints its own truth, one
// `key=value` a line:
//
//	calls|SIDE|METHOD|CODE=N        calls by side (client, server), full method, code
//	sent|SIDE|METHOD=BYTES          bytes of the messages that side sent (proto.Size)
//	sent_msgs|SIDE|METHOD=N         messages that side sent
//	recv|SIDE|METHOD=BYTES, recv_msgs|SIDE|METHOD=N   the same for messages received
//	code|CODE=NUMBER                each code seen, by name: its number (codes.Code)
//	tp|TRACE|SPAN|METHOD=1          a call sent with that traceparent in its metadata
//
// The server side counts what its handlers returned (an interceptor sees each call's
// error); the calls to the unknown methods never reach a handler: grpc's server
// answers them Unimplemented, and the program counts each answer, as its client got it,
// on the server side too. The server reads no message of those calls.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// truth holds the program's own counts.
type truth struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *truth) add(key string, v int) {
	t.mu.Lock()
	t.n[key] += v
	t.mu.Unlock()
}

func (t *truth) call(side, method string, err error) {
	code := status.Code(err)
	t.add(fmt.Sprintf("calls|%s|%s|%s", side, method, code), 1)
	t.mu.Lock()
	t.n[fmt.Sprintf("code|%s", code)] = int(code)
	t.mu.Unlock()
}

// traced gives every other call a W3C traceparent in its metadata (the caller's trace,
// as an instrumented client would send it), counted as `tp|TRACE|SPAN|METHOD=1`.
func traced(ctx context.Context, yes bool, method string) context.Context {
	if !yes {
		return ctx
	}
	trace, span := make([]byte, 16), make([]byte, 8)
	rand.Read(trace)
	rand.Read(span)
	tp := fmt.Sprintf("00-%x-%x-01", trace, span)
	counts.add(fmt.Sprintf("tp|%x|%x|%s", trace, span, method), 1)
	return metadata.AppendToOutgoingContext(ctx, "traceparent", tp)
}

// most keeps the greatest v under key (nothing while every v is 0 or less).
func (t *truth) most(key string, v int) {
	t.mu.Lock()
	if v > t.n[key] {
		t.n[key] = v
	}
	t.mu.Unlock()
}

// slowDeadline is the client's deadline of the call its deadline ends. That call's
// handler records how long before it the call reached it, the most of every round in
// ns, as `slow|left_ns`: both sides' latency of the call is at least that (the client's
// stream began before the handler, and ends at the deadline or after; the handler
// waits for it, its server's deadline being no earlier).
var slowDeadline struct {
	mu sync.Mutex
	at time.Time
}

func (t *truth) sent(side, method string, m proto.Message) {
	t.add(fmt.Sprintf("sent|%s|%s", side, method), proto.Size(m))
	t.add(fmt.Sprintf("sent_msgs|%s|%s", side, method), 1)
}

func (t *truth) recv(side, method string, m proto.Message) {
	t.add(fmt.Sprintf("recv|%s|%s", side, method), proto.Size(m))
	t.add(fmt.Sprintf("recv_msgs|%s|%s", side, method), 1)
}

var counts = &truth{n: map[string]int{}}

const svc = "/grpc.testing.TestService/"

// server implements the interop TestService; what it sends and receives is counted
// on the server side.
type server struct {
	testpb.UnimplementedTestServiceServer
}

func echoErr(s *testpb.EchoStatus) error {
	if s == nil || s.Code == 0 {
		return nil
	}
	return status.Error(codes.Code(s.Code), s.Message)
}

func (server) EmptyCall(ctx context.Context, in *testpb.Empty) (*testpb.Empty, error) {
	counts.recv("server", svc+"EmptyCall", in)
	out := &testpb.Empty{}
	counts.sent("server", svc+"EmptyCall", out)
	return out, nil
}

func (server) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	counts.recv("server", svc+"UnaryCall", in)
	if in.ResponseType == testpb.PayloadType_COMPRESSABLE && in.ResponseSize < 0 {
		// Waits for the client's deadline.
		slowDeadline.mu.Lock()
		left := time.Until(slowDeadline.at)
		slowDeadline.mu.Unlock()
		counts.most("slow|left_ns", int(left))
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := echoErr(in.ResponseStatus); err != nil {
		return nil, err
	}
	out := &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.ResponseSize)}}
	counts.sent("server", svc+"UnaryCall", out)
	return out, nil
}

func (server) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testpb.StreamingOutputCallResponse]) error {
	m := svc + "StreamingOutputCall"
	counts.recv("server", m, in)
	for _, p := range in.ResponseParameters {
		out := &testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.Size)}}
		if err := stream.Send(out); err != nil {
			return err
		}
		counts.sent("server", m, out)
	}
	return echoErr(in.ResponseStatus)
}

func (server) StreamingInputCall(stream grpc.ClientStreamingServer[testpb.StreamingInputCallRequest, testpb.StreamingInputCallResponse]) error {
	m := svc + "StreamingInputCall"
	total := 0
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		counts.recv("server", m, in)
		total += len(in.GetPayload().GetBody())
	}
	out := &testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)}
	counts.sent("server", m, out)
	return stream.SendAndClose(out)
}

func (server) FullDuplexCall(stream grpc.BidiStreamingServer[testpb.StreamingOutputCallRequest, testpb.StreamingOutputCallResponse]) error {
	m := svc + "FullDuplexCall"
	for {
		in, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		counts.recv("server", m, in)
		if err := echoErr(in.ResponseStatus); err != nil {
			return err
		}
		for _, p := range in.ResponseParameters {
			out := &testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.Size)}}
			if err := stream.Send(out); err != nil {
				return err
			}
			counts.sent("server", m, out)
		}
	}
}

// The server side's calls, as its handlers returned them.
func unaryTruth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	counts.call("server", info.FullMethod, err)
	if r, ok := req.(*testpb.SimpleRequest); ok && r.ResponseSize < 0 {
		slowDone <- struct{}{}
	}
	return resp, err
}

// slowDone tells the client that the handler its deadline ended has returned (with
// DeadlineExceeded, or Canceled when the client's cancel reached it first).
var slowDone = make(chan struct{}, 1)

func streamTruth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	counts.call("server", info.FullMethod, err)
	return err
}

func params(sizes ...int32) []*testpb.ResponseParameters {
	var ps []*testpb.ResponseParameters
	for _, s := range sizes {
		ps = append(ps, &testpb.ResponseParameters{Size: s})
	}
	return ps
}

// round makes one round of calls; every call's outcome and message is counted on the
// client side.
func round(c testpb.TestServiceClient, cc *grpc.ClientConn, i int) {
	ctx := context.Background()
	cl := "client"

	// Unary: an empty message each way, payloads of several sizes, error codes.
	m := svc + "EmptyCall"
	e := &testpb.Empty{}
	counts.sent(cl, m, e)
	out, err := c.EmptyCall(ctx, e)
	if err == nil {
		counts.recv(cl, m, out)
	}
	counts.call(cl, m, err)

	m = svc + "UnaryCall"
	reqs := []*testpb.SimpleRequest{
		{ResponseSize: 10, Payload: &testpb.Payload{Body: make([]byte, 100+i)}},
		{ResponseSize: 2000, Payload: &testpb.Payload{Body: make([]byte, 3)}},
		{ResponseSize: 0},
		{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.NotFound), Message: "no such thing"}},
		{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.InvalidArgument), Message: "bad"}},
	}
	if i%2 == 0 {
		reqs = append(reqs, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.PermissionDenied)}})
	}
	for k, req := range reqs {
		counts.sent(cl, m, req)
		out, err := c.UnaryCall(traced(ctx, k%2 == 0, m), req)
		if err == nil {
			counts.recv(cl, m, out)
		}
		counts.call(cl, m, err)
	}

	// A call the client's deadline ends: the handler waits for it.
	slow := &testpb.SimpleRequest{ResponseType: testpb.PayloadType_COMPRESSABLE, ResponseSize: -1}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	slowDeadline.mu.Lock()
	slowDeadline.at, _ = dctx.Deadline()
	slowDeadline.mu.Unlock()
	counts.sent(cl, m, slow)
	_, err = c.UnaryCall(dctx, slow)
	cancel()
	counts.call(cl, m, err)
	// Its handler's return, when the call reached the server at all: a deadline that
	// ended before the client sent the call (a loaded host) leaves nothing to wait for,
	// and the server counts nothing (waiting unbounded hung the program once so).
	select {
	case <-slowDone:
	case <-time.After(5 * time.Second):
	}

	// Server streaming: 3 responses and OK, then 2 responses and ResourceExhausted.
	m = svc + "StreamingOutputCall"
	for _, req := range []*testpb.StreamingOutputCallRequest{
		{ResponseParameters: params(5, 500, 50)},
		{ResponseParameters: params(7, 70), ResponseStatus: &testpb.EchoStatus{Code: int32(codes.ResourceExhausted)}},
	} {
		s, err := c.StreamingOutputCall(traced(ctx, true, m), req)
		if err != nil {
			counts.call(cl, m, err)
			continue
		}
		counts.sent(cl, m, req)
		for {
			out, err := s.Recv()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				counts.call(cl, m, err)
				break
			}
			counts.recv(cl, m, out)
		}
	}

	// Client streaming: 4 messages, one response.
	m = svc + "StreamingInputCall"
	if s, err := c.StreamingInputCall(ctx); err != nil {
		counts.call(cl, m, err)
	} else {
		for k := 0; k < 4; k++ {
			req := &testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 10*k+i)}}
			if err := s.Send(req); err != nil {
				break
			}
			counts.sent(cl, m, req)
		}
		out, err := s.CloseAndRecv()
		if err == nil {
			counts.recv(cl, m, out)
		}
		counts.call(cl, m, err)
	}

	// Bidirectional: 3 pings with 2 answers each and OK; then one ping, then Aborted.
	m = svc + "FullDuplexCall"
	for _, last := range []*testpb.EchoStatus{nil, {Code: int32(codes.Aborted), Message: "stop"}} {
		s, err := c.FullDuplexCall(ctx)
		if err != nil {
			counts.call(cl, m, err)
			continue
		}
		pings := []*testpb.StreamingOutputCallRequest{
			{ResponseParameters: params(1, 2)},
			{ResponseParameters: params(300, 4), Payload: &testpb.Payload{Body: make([]byte, 20)}},
			{ResponseParameters: params(0, 60)},
		}
		if last != nil {
			pings = []*testpb.StreamingOutputCallRequest{{ResponseParameters: params(9)}, {ResponseStatus: last}}
		}
		var final error
		for _, p := range pings {
			if err := s.Send(p); err != nil {
				break
			}
			counts.sent(cl, m, p)
			for range p.ResponseParameters {
				out, err := s.Recv()
				if err != nil {
					final = err
					break
				}
				counts.recv(cl, m, out)
			}
		}
		s.CloseSend()
		for final == nil {
			out, err := s.Recv()
			if err != nil {
				final = err
				break
			}
			counts.recv(cl, m, out)
		}
		if errors.Is(final, io.EOF) {
			final = nil
		}
		counts.call(cl, m, final)
	}

	// A stream to a method the server does not have, that only waits for its answer:
	// grpc's server answers Unimplemented from the stream's headers alone, and the
	// client writes nothing (its status arrives before any write of the stream).
	m = svc + "NoSuchStream"
	if s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, m); err != nil {
		counts.call(cl, m, err)
	} else {
		err := s.RecvMsg(&testpb.Empty{})
		counts.call(cl, m, err)
		if status.Code(err) == codes.Unimplemented {
			counts.call("server", m, err)
		}
	}

	// A method the server does not have: grpc's server answers Unimplemented.
	m = svc + "NoSuchMethod"
	e = &testpb.Empty{}
	counts.sent(cl, m, e)
	err = cc.Invoke(ctx, m, e, &testpb.Empty{})
	counts.call(cl, m, err)
	if status.Code(err) == codes.Unimplemented {
		counts.call("server", m, err)
	}
}

func main() {
	rounds := 3
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	// The server side counts a call when its handler returns, before grpc writes its
	// status (where gtrace sees it end). The client's status says the server's was
	// written, except for the call its deadline ended: that handler may still be on
	// its way to the status write when the last round is done. Stop waits for every
	// handler (WaitForHandlers), so each call counted has had its status written
	// before the program prints and exits.
	srv := grpc.NewServer(grpc.UnaryInterceptor(unaryTruth), grpc.StreamInterceptor(streamTruth), grpc.WaitForHandlers(true))
	testpb.RegisterTestServiceServer(srv, server{})
	go srv.Serve(lis)

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	c := testpb.NewTestServiceClient(cc)
	// Give the tracer time to attach before the first call (gtrace -c starts the
	// program and attaches before it runs main, but a margin costs nothing).
	time.Sleep(50 * time.Millisecond)
	for i := 0; i < rounds; i++ {
		round(c, cc, i)
	}
	cc.Close()
	srv.Stop()

	keys := make([]string, 0, len(counts.n))
	for k := range counts.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("%s=%d\n", k, counts.n[k])
	}
}
