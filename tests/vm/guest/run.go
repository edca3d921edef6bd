// Running gtrace inside the guest and reading its output: a whole run (-c), a tracer
// kept running while a case drives its target, and the truth a Go program prints.
package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const gtraceBin = "/bin/gtrace"

// How long one gtrace run may take under TCG before the case fails.
const runLimit = 300 * time.Second

// What one gtrace run printed, and how it ended.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d; stdout: %s; stderr: %s", r.code, clip(r.stdout), clip(r.stderr))
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:300] + " [...] " + s[len(s)-300:]
	}
	return s
}

// gtraceAs runs gtrace with args to its end (at most runLimit), with attrs for its process
// (nil: as the cases run it, `asTracer`).
func gtraceAs(attrs *syscall.SysProcAttr, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, gtraceBin, args...)
	if attrs == nil {
		attrs = asTracer()
	}
	cmd.SysProcAttr = attrs
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
	if ctx.Err() != nil {
		return r, fmt.Errorf("gtrace %v did not end in %v: %v", args, runLimit, r)
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return r, fmt.Errorf("run gtrace: %v", err)
	}
	return r, nil
}

// trace runs `gtrace -e script -c /bin/CMD` and wants it to attach and end well.
func trace(script, cmd string, extra ...string) (result, error) {
	args := append([]string{"-e", script}, extra...)
	r, err := gtraceAs(nil, append(args, "-c", "/bin/"+cmd)...)
	if err != nil {
		return r, err
	}
	if r.code != 0 || !strings.Contains(r.stderr, "Attached") {
		return r, fmt.Errorf("gtrace on %q did not trace: %v", cmd, r)
	}
	return r, nil
}

// truth: the number after `key=` in a program's own output.
func truth(out, key string) (int64, error) {
	for _, w := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(w, key+"="); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("the program printed no %s= in: %s", key, clip(out))
}

// mapValue: the number gtrace printed for `@name: N` (1,234 as 1234; what follows it,
// such as "(partial: ...)", left out).
func mapValue(out, name string) (int64, bool) {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			word, _, _ := strings.Cut(strings.TrimSpace(v), " ")
			n, err := strconv.ParseInt(strings.ReplaceAll(word, ",", ""), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// sameAsTruth: gtrace's @name equals the program's key=, in r's stdout.
func sameAsTruth(r result, name, key string) error {
	want, err := truth(r.stdout, key)
	if err != nil {
		return err
	}
	got, ok := mapValue(r.stdout, name)
	if !ok {
		return fmt.Errorf("gtrace printed no %s (the program says %s=%d): %v", name, key, want, r)
	}
	if got != want {
		return fmt.Errorf("%s is %d, the program says %s=%d: %v", name, got, key, want, r)
	}
	return nil
}

// first: the first error of several checks.
func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

var bucketLine = regexp.MustCompile(`^[\[(](.*?)[)\]]\s+(\d+)\s+\|`)

// histogram: the buckets of the histogram printed under `header`, and their total.
func histogram(out, header string) (labels []string, total int64) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l != header {
			continue
		}
		for _, b := range lines[i+1:] {
			m := bucketLine.FindStringSubmatch(b)
			if m == nil {
				break
			}
			n, _ := strconv.ParseInt(m[2], 10, 64)
			labels, total = append(labels, m[1]), total+n
		}
		break
	}
	return labels, total
}

// A gtrace left running while a case drives its target.
type tracer struct {
	cmd      *exec.Cmd
	out, err syncBuffer
	attached chan bool
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startTracer starts gtrace with args and returns once it says Attached (or fails).
func startTracer(args ...string) (*tracer, error) {
	t := &tracer{cmd: exec.Command(gtraceBin, args...), attached: make(chan bool, 1)}
	t.cmd.SysProcAttr = asTracer()
	t.cmd.Stdout = &t.out
	stderr, err := t.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		r := bufio.NewReader(stderr)
		said := false
		for {
			line, err := r.ReadString('\n')
			t.err.Write([]byte(line))
			if !said && strings.HasPrefix(line, "Attached") {
				said = true
				t.attached <- true
			}
			if err != nil {
				if !said {
					t.attached <- false
				}
				return
			}
		}
	}()
	select {
	case ok := <-t.attached:
		if ok {
			return t, nil
		}
	case <-time.After(runLimit):
	}
	t.cmd.Process.Kill()
	t.cmd.Wait()
	return nil, fmt.Errorf("gtrace %v did not attach: %s", args, clip(t.err.String()))
}

// finish stops the tracer with sig (0: waits for it to end by itself) and returns what
// it printed.
func (t *tracer) finish(sig syscall.Signal) (result, error) {
	if sig != 0 {
		t.cmd.Process.Signal(sig)
	}
	done := make(chan error, 1)
	go func() { done <- t.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(runLimit):
		t.cmd.Process.Kill()
		<-done
		return result{}, fmt.Errorf("gtrace did not end: %s", clip(t.err.String()))
	}
	time.Sleep(50 * time.Millisecond) // the stderr reader's last line
	return result{t.out.String(), t.err.String(), t.cmd.ProcessState.ExitCode()}, nil
}

// A Go program driven line by line on its stdin (tests/go/fleet, tests/vm/stress).
type driven struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startDriven starts a target program with attrs, as the user the cases trace as
// (`asTarget`).
func startDriven(attrs *syscall.SysProcAttr, name string, args ...string) (*driven, error) {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = asTarget(attrs)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", name, err)
	}
	return &driven{cmd, in, bufio.NewReader(out)}, nil
}

// say writes a line to the program and returns the next line it prints.
func (d *driven) say(line string) (string, error) {
	if line != "" {
		if _, err := io.WriteString(d.in, line+"\n"); err != nil {
			return "", err
		}
	}
	return d.out.ReadString('\n')
}

// end closes the program's stdin, reads the rest of its output and waits for it.
func (d *driven) end() string {
	d.in.Close()
	rest, _ := io.ReadAll(d.out)
	d.cmd.Wait()
	return string(rest)
}
