// vmguest runs gtrace's end-to-end cases inside one of tests/vm's virtual machines. It is
// started by the initramfs's /init, reads its options from the kernel's command line
// (gtrace.cases=all|NAME,NAME... and gtrace.stress=SECONDS), and prints one line per case
// on the console for tests/vm/run to read:
//
//	GTRACE-VM info release=7.3.4+deb13-amd64 preempt=full cpus=2 ...
//	GTRACE-VM case entry ok 2.1s
//	GTRACE-VM case budget FAIL 9.8s: @cold is 160, the program says 165
//	GTRACE-VM note ...
//
// Every case compares gtrace's output with what the traced Go program prints about
// itself; the last one checks that the kernel logged no oops, BUG or WARNING. gtrace runs
// as uid 1000 holding only the capabilities the kernel needs (user.go).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// A case: a name (what gtrace.cases selects) and a check returning why it failed.
type testCase struct {
	name string
	run  func() error
}

var cases = []testCase{
	{"entry", caseEntry},
	{"return-hist", caseReturnHist},
	{"printf", casePrintf},
	{"stack-growth", caseStackGrowth},
	{"arith", caseArith},
	{"self", caseSelf},
	{"line", caseLine},
	{"panic", casePanic},
	{"gomap", caseGoMap},
	{"budget", caseBudget},
	{"stats", caseStats},
	{"cgroup", caseCgroup},
	{"pid-namespace", casePidNamespace},
	{"privileges", casePrivileges},
	{"privileges-missing", casePrivilegesMissing},
}

// Cases run only when named (gtrace.cases=all,ustack): the arm64 row's.
var namedCases = []testCase{
	{"ustack", caseUstack},
}

func main() {
	opts := kernelOptions()
	printInfo()
	setupUser(opts, strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")))
	selected := strings.Split(opts["gtrace.cases"], ",")
	for _, c := range cases {
		if selected[0] == "" || contains(selected, "all") || contains(selected, c.name) {
			runCase(c)
		}
	}
	for _, c := range namedCases {
		if contains(selected, c.name) {
			runCase(c)
		}
	}
	if secs, _ := strconv.Atoi(opts["gtrace.stress"]); secs > 0 {
		runCase(testCase{"stress", func() error { return caseStress(secs) }})
	}
	runCase(testCase{"kernel-log", caseKernelLog})
}

func runCase(c testCase) {
	start := time.Now()
	err := c.run()
	secs := time.Since(start).Seconds()
	if err != nil {
		fmt.Printf("GTRACE-VM case %s FAIL %.1fs: %s\n", c.name, secs, oneLine(err.Error()))
		return
	}
	fmt.Printf("GTRACE-VM case %s ok %.1fs\n", c.name, secs)
}

// note prints a finding that is not a pass or a fail (what a kernel allowed, a count).
func note(format string, args ...any) {
	fmt.Printf("GTRACE-VM note %s\n", oneLine(fmt.Sprintf(format, args...)))
}

// oneLine keeps a message on one console line, short enough to read.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1500 {
		s = s[:1500] + "..."
	}
	return s
}

// kernelOptions: the gtrace.* words of /proc/cmdline.
func kernelOptions() map[string]string {
	opts := map[string]string{}
	data, _ := os.ReadFile("/proc/cmdline")
	for _, w := range strings.Fields(string(data)) {
		if k, v, ok := strings.Cut(w, "="); ok && strings.HasPrefix(k, "gtrace.") {
			opts[k] = v
		}
	}
	return opts
}

func printInfo() {
	release := strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	version := strings.TrimSpace(readFile("/proc/sys/kernel/version"))
	// A line of its own: the console may hold the firmware's escapes before it.
	fmt.Printf("\nGTRACE-VM info release=%s preempt=%s cpus=%d go=%s\n", release, preemptModel(version),
		runtime.NumCPU(), runtime.Version())
	fmt.Printf("GTRACE-VM info-version %s\n", version)
	if models := strings.TrimSpace(readFile("/sys/kernel/debug/sched/preempt")); models != "" {
		fmt.Printf("GTRACE-VM info-preempt %s\n", models)
	}
}

// preemptModel: rt on a PREEMPT_RT kernel, else the model debugfs marks as current
// ("none voluntary (full) lazy"), else what the version string says.
func preemptModel(version string) string {
	if strings.Contains(version, "PREEMPT_RT") {
		return "rt"
	}
	for _, w := range strings.Fields(readFile("/sys/kernel/debug/sched/preempt")) {
		if strings.HasPrefix(w, "(") {
			return strings.Trim(w, "()")
		}
	}
	if strings.Contains(version, "PREEMPT ") {
		return "full"
	}
	return "default"
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
