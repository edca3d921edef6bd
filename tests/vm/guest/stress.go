// The preemption stress: many goroutines of tests/vm/stress on one CPU (4 threads pinned
// to CPU 0), traced by printf, hist, self and m[k] in one entry and one return program,
// for a while. Under full, lazy or RT preemption two threads can interleave inside one
// eBPF program there; whatever that breaks shows as a lost increment (the counts against
// the program's own), a corrupted event (its fields against each other) or a kernel
// message (the kernel-log case).
package main

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

const stressWorkers = 8

const stressScript = `
on entry main.step {
    @calls = count()
    @per[id] = count()
    self.chk = chk
    if ev { printf("ev %d %d %d %d %s\n", id, i, chk, m[id], tag) }
}
on return main.step {
    @lat = hist(elapsed)
    if self.chk == ret { @self_ok = count() } else { @self_bad = count() }
}`

// setAffinity pins the calling thread to the CPUs of mask.
func setAffinity(mask uint64) error {
	_, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask)))
	if e != 0 {
		return e
	}
	return nil
}

// startPinned starts the stress program with every thread on CPU 0 (the affinity of the
// thread that forks it is inherited), or on every CPU with gtrace.stress-cpus=all.
func startPinned(seconds int) (*driven, error) {
	if kernelOptions()["gtrace.stress-cpus"] == "all" {
		return startDriven(nil, "/bin/stress", fmt.Sprint(seconds), fmt.Sprint(stressWorkers))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setAffinity(1); err != nil {
		return nil, err
	}
	defer setAffinity(^uint64(0))
	os.Setenv("GOMAXPROCS", "4")
	defer os.Unsetenv("GOMAXPROCS")
	return startDriven(nil, "/bin/stress", fmt.Sprint(seconds), fmt.Sprint(stressWorkers))
}

func caseStress(seconds int) error {
	d, err := startPinned(seconds)
	if err != nil {
		return err
	}
	if line, err := d.say(""); err != nil || line != "ready\n" {
		d.end()
		return fmt.Errorf("stress did not start: %q %v", line, err)
	}
	// gtrace.stress-unguarded=1: gtrace loads its programs as on a kernel without
	// bpf_preempt_disable (GTRACE_NO_PREEMPT_GUARD), to show what the guard prevents.
	unguarded := kernelOptions()["gtrace.stress-unguarded"] == "1"
	if unguarded {
		os.Setenv("GTRACE_NO_PREEMPT_GUARD", "1")
		defer os.Unsetenv("GTRACE_NO_PREEMPT_GUARD")
	}
	// --budget off: the stress costs its target far more than the default 5% of -p.
	t, err := startTracer("-p", fmt.Sprint(d.cmd.Process.Pid), "--budget", "off", "-e", stressScript)
	if err != nil {
		d.end()
		return err
	}
	d.in.Write([]byte("go\n"))
	own := d.end()
	r, err := t.finish(0)
	if err != nil {
		return err
	}
	if r.code != 0 {
		return fmt.Errorf("gtrace failed: %v", r)
	}
	r.stdout += "\n" + own
	return stressVerdict(stressCounts(r, own), r.stderr, unguarded)
}

// unguardedNote is how gtrace's line begins where the kernel can preempt its probes and
// they run without bpf_preempt_disable.
const unguardedNote = "note: this kernel can preempt gtrace's probes"

// stressVerdict: guarded (the default), the stress must find no damage and gtrace must
// not say its probes run unguarded. Unguarded, gtrace must say so where its programs
// run preemptible (multi-uprobe links, a preemptible model); the damage found is
// noted, what that line warns of, and is not a failure.
func stressVerdict(damage error, stderr string, unguarded bool) error {
	said := strings.Contains(stderr, unguardedNote)
	if said {
		note("stress: gtrace said: %s", firstLines(stderr[strings.Index(stderr, unguardedNote):], 1))
	}
	if !unguarded {
		if said {
			return fmt.Errorf("gtrace said its probes run unguarded on a kernel with bpf_preempt_disable")
		}
		return damage
	}
	if damage != nil {
		note("stress unguarded: the damage gtrace's note warns of: %v", damage)
	}
	model := preemptModel(strings.TrimSpace(readFile("/proc/sys/kernel/version")))
	if model != "full" && model != "lazy" && model != "rt" {
		return nil
	}
	if !said {
		return fmt.Errorf("unguarded under %s preemption, gtrace did not say its probes can be preempted", model)
	}
	return nil
}

// stressCounts compares the counts and the events with the program's truth, and notes
// every kind of damage found (not only the first).
func stressCounts(r result, own string) error {
	total, err := truth(own, "total")
	if err != nil {
		return err
	}
	var damage []string
	if got, _ := mapValue(r.stdout, "@calls"); got != total || countPrefix(r.stdout, "@calls: ") != 1 {
		damage = append(damage, fmt.Sprintf("@calls %d of %d in %d entries", got, total, countPrefix(r.stdout, "@calls: ")))
	}
	if got, _ := mapValue(r.stdout, "@self_ok"); got != total {
		bad, _ := mapValue(r.stdout, "@self_bad")
		damage = append(damage, fmt.Sprintf("self: %d returns matched their entry of %d, %d saw another value", got, total, bad))
	}
	if _, n := histogram(r.stdout, "@lat:"); n != total {
		damage = append(damage, fmt.Sprintf("@lat holds %d calls of %d", n, total))
	}
	damage = append(damage, perWorker(r.stdout, own)...)
	events, bad := stressEvents(r.stdout)
	want, _ := truth(own, "events")
	lost := lostEvents(r.stderr)
	if len(bad) > 0 {
		damage = append(damage, fmt.Sprintf("%d corrupted events, e.g. %q", len(bad), bad[0]))
	}
	if events+lost != want {
		damage = append(damage, fmt.Sprintf("%d good events and %d said lost of %d", events, lost, want))
	}
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, "refused") || strings.Contains(l, "skipped") {
			damage = append(damage, "gtrace said: "+l)
		}
	}
	where := "4 threads on CPU 0"
	if kernelOptions()["gtrace.stress-cpus"] == "all" {
		where = "every CPU"
	}
	note("stress: %d calls of %d goroutines on %s, %d events printed of %d (%d said lost); damage: %d kinds",
		total, stressWorkers, where, events, want, lost, len(damage))
	for _, d := range damage {
		note("stress damage: %s", d)
	}
	if len(damage) > 0 {
		return fmt.Errorf("%s", strings.Join(damage, "; "))
	}
	return nil
}

func countPrefix(out, prefix string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// perWorker: @per[id] against each worker's own count, and keys no worker has.
func perWorker(out, own string) []string {
	var damage []string
	var lostIncrements int64
	for _, l := range strings.Split(own, "\n") {
		var id, calls int64
		if _, err := fmt.Sscanf(l, "worker=%d calls=%d", &id, &calls); err == nil {
			got, _ := mapValue(out, fmt.Sprintf("@per[%d]", id))
			lostIncrements += calls - got
		}
	}
	if lostIncrements != 0 {
		damage = append(damage, fmt.Sprintf("@per[id]: %d increments lost (the workers' counts less gtrace's)", lostIncrements))
	}
	if keys := countPrefix(out, "@per["); keys != stressWorkers {
		damage = append(damage, fmt.Sprintf("@per has %d keys for %d workers", keys, stressWorkers))
	}
	return damage
}

var eventLine = regexp.MustCompile(`^ev (-?\d+) (-?\d+) (-?\d+) (-?\d+) (\S*)$`)

// stressEvents: how many `ev` lines hold fields true to each other, and the others.
func stressEvents(out string) (good int64, bad []string) {
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "ev ") {
			continue
		}
		m := eventLine.FindStringSubmatch(l)
		if m == nil {
			bad = append(bad, l)
			continue
		}
		var v [4]int64
		for k := range v {
			v[k], _ = strconv.ParseInt(m[k+1], 10, 64)
		}
		id, i, chk, mv := v[0], v[1], v[2], v[3]
		if id < 0 || id >= stressWorkers || i%256 != 0 || chk != id*1000003+i || mv != id*7 || m[5] != fmt.Sprintf("w%d", id) {
			bad = append(bad, l)
			continue
		}
		good++
	}
	return good, bad
}

var lostLine = regexp.MustCompile(`lost ([\d,]+) events?: ring buffer full`)

func lostEvents(stderr string) int64 {
	m := lostLine.FindStringSubmatch(stderr)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
	return n
}
