// The cases about where a process runs and who traces it: --cgroup, -p of a process in
// another pid namespace (the twins of tests/fleet.rs, with tests/go/fleet), gtrace as a
// user holding only some capabilities, and the kernel's own log.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

const fleetScript = "on entry main.work { @calls = count(); @sum = sum(i); @pids[pid] = count() }"

// fleetRun asks a started tests/go/fleet to call work n times; returns its truth line.
func fleetRun(d *driven, n int) (string, error) {
	line, err := d.say(fmt.Sprint(n))
	if err != nil || !strings.HasPrefix(line, "truth:") {
		return "", fmt.Errorf("fleet said %q (%v)", line, err)
	}
	return line, nil
}

func startFleet(attrs *syscall.SysProcAttr) (*driven, error) {
	d, err := startDriven(attrs, "/bin/fleet")
	if err != nil {
		return nil, err
	}
	if line, err := d.say(""); err != nil || !strings.HasPrefix(line, "ready") {
		return nil, fmt.Errorf("fleet did not start: %q %v", line, err)
	}
	return d, nil
}

// caseCgroup: two processes of one file, one in the cgroup given to --cgroup and one
// outside it; only the first one's calls are counted.
func caseCgroup() error {
	var fds []*os.File
	for _, name := range []string{"vm-in", "vm-out"} {
		dir := filepath.Join("/sys/fs/cgroup", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		f, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer f.Close()
		fds = append(fds, f)
	}
	in, err := startFleet(&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fds[0].Fd())})
	if err != nil {
		return err
	}
	defer in.end()
	out, err := startFleet(&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fds[1].Fd())})
	if err != nil {
		return err
	}
	defer out.end()
	t, err := startTracer("-b", "/bin/fleet", "--cgroup", "/sys/fs/cgroup/vm-in", "-e", fleetScript)
	if err != nil {
		return err
	}
	truthIn, err := fleetRun(in, 300)
	if err != nil {
		return err
	}
	if _, err := fleetRun(out, 200); err != nil {
		return err
	}
	r, err := t.finish(syscall.SIGINT)
	if err != nil {
		return err
	}
	if !strings.Contains(truthIn, "cgroup=/vm-in") {
		return fmt.Errorf("the process is not in /vm-in: %s", truthIn)
	}
	return fleetCounts(r, truthIn, in.cmd.Process.Pid)
}

// fleetCounts: gtrace counted exactly the calls and sum of fleet's truth line, all under
// the host's pid of that process.
func fleetCounts(r result, truthLine string, pid int) error {
	r.stdout += "\n" + truthLine
	pids := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "@pids[") {
			pids++
		}
	}
	want := fmt.Sprintf("@pids[%d]", pid)
	if _, ok := mapValue(r.stdout, want); !ok || pids != 1 {
		return fmt.Errorf("want one %s (the host's pid): %v", want, r)
	}
	return first(sameAsTruth(r, "@calls", "calls"), sameAsTruth(r, "@sum", "sum"), sameAsTruth(r, want, "calls"))
}

// casePidNamespace: -p of a process that is pid 1 of its own pid namespace.
func casePidNamespace() error {
	d, err := startFleet(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	if err != nil {
		return err
	}
	pid := d.cmd.Process.Pid
	t, err := startTracer("-p", fmt.Sprint(pid), "-e", fleetScript)
	if err != nil {
		d.end()
		return err
	}
	line, err := fleetRun(d, 250)
	d.end()
	if err != nil {
		return err
	}
	if !strings.Contains(line, " pid=1 ") {
		return fmt.Errorf("the process is not pid 1 of its namespace: %s", line)
	}
	// gtrace ends by itself when its target does.
	r, err := t.finish(0)
	if err != nil {
		return err
	}
	if r.code != 0 {
		return fmt.Errorf("gtrace failed: %v", r)
	}
	return fleetCounts(r, line, pid)
}

// Capabilities by number (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

var capNames = map[uintptr]string{capSysAdmin: "SYS_ADMIN", capPerfmon: "PERFMON", capBPF: "BPF"}

// casePrivileges: the entry case as uid 1000 holding CAP_BPF and CAP_PERFMON alone:
// exact on a kernel with multi-uprobe links (6.6 on); before, refused naming
// CAP_SYS_ADMIN, and exact with it added. So the set the other cases run gtrace with
// (`tracerCaps`) is the least one that traces.
func casePrivileges() error {
	script, cmd := "on entry main.add { @calls = count(); @sum = sum(a) }", "/bin/e2e add 300"
	small := []uintptr{capBPF, capPerfmon}
	r, err := gtraceAs(asUser(small), "-e", script, "-c", cmd)
	if err != nil {
		return err
	}
	exact := func(r result, caps []uintptr) error {
		if r.code != 0 {
			return fmt.Errorf("as uid 1000 with only %s: gtrace exits %d: %s", capList(caps), r.code, firstLines(r.stderr, 3))
		}
		if err := first(sameAsTruth(r, "@calls", "calls"), sameAsTruth(r, "@sum", "sum_a")); err != nil {
			return fmt.Errorf("as uid 1000 with only %s: %v", capList(caps), err)
		}
		note("privileges: uid 1000 with only %s traces exactly", capList(caps))
		return nil
	}
	if len(tracerCaps) == len(small) {
		return exact(r, small)
	}
	if r.code == 0 {
		return fmt.Errorf("uid 1000 with only %s traced on a kernel taken to need CAP_SYS_ADMIN", capList(small))
	}
	if !strings.Contains(r.stderr, "gtrace lacks CAP_SYS_ADMIN") {
		return fmt.Errorf("as uid 1000 with only %s, the refusal does not name CAP_SYS_ADMIN: %s", capList(small),
			firstLines(r.stderr, 3))
	}
	note("privileges: uid 1000 with only %s: %s", capList(small), firstLines(r.stderr, 2))
	if r, err = gtraceAs(asUser(tracerCaps), "-e", script, "-c", cmd); err != nil {
		return err
	}
	return exact(r, tracerCaps)
}

// casePrivilegesMissing: uid 1000 with CAP_BPF alone, and with none, is refused, and
// gtrace's error names what it lacks.
func casePrivilegesMissing() error {
	for _, caps := range [][]uintptr{{capBPF}, {}} {
		r, err := gtraceAs(asUser(caps), "-e", "on entry main.add { @calls = count() }", "-c", "/bin/e2e add 30")
		if err != nil {
			return err
		}
		if r.code == 0 {
			return fmt.Errorf("uid 1000 with capabilities %v traced", caps)
		}
		if err := namesMissing(r.stderr, caps); err != nil {
			return err
		}
		note("privileges: uid 1000 with %d capabilities: %s", len(caps), firstLines(r.stderr, 2))
	}
	return nil
}

// namesMissing: a refusal for lack of privileges says `gtrace lacks CAP_X` for a
// capability X out of those held.
func namesMissing(stderr string, held []uintptr) error {
	_, after, ok := strings.Cut(stderr, "gtrace lacks ")
	if !ok {
		return fmt.Errorf("the refusal names no missing capability: %s", firstLines(stderr, 3))
	}
	for c, name := range capNames {
		if strings.HasPrefix(after, "CAP_"+name) && !slices.Contains(held, c) {
			return nil
		}
	}
	return fmt.Errorf("the refusal names a capability gtrace holds: %s", firstLines(stderr, 3))
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// lastLines: the last n lines of s, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// caseKernelLog: no oops, BUG, WARNING or other trouble in the kernel's log since boot.
func caseKernelLog() error {
	out, err := exec.Command("/bin/dmesg").Output()
	if err != nil {
		return fmt.Errorf("dmesg: %v", err)
	}
	var bad []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, sign := range []string{"BUG:", "Oops", "WARNING:", "general protection", "Call Trace", "segfault", "traps:"} {
			if strings.Contains(l, sign) {
				bad = append(bad, strings.TrimSpace(l))
				break
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the kernel logged: %s", strings.Join(bad, " | "))
	}
	return nil
}
