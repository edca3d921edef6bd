// Who the cases run gtrace as: uid 1000 holding only the capabilities this kernel needs
// (CAP_BPF and CAP_PERFMON; CAP_SYS_ADMIN too before 6.6, where gtrace attaches
// perf-event uprobes, which need it since the fix for CVE-2025-38466), and the programs
// they trace as the same user without capabilities. gtrace.as=root on the kernel's
// command line runs them as root instead.
package main

import (
	"fmt"
	"strings"
	"syscall"
)

// The user the cases run as.
const caseUID = 1000

var (
	// What gtrace holds in the cases (set by setupUser).
	tracerCaps []uintptr
	asRoot     bool
)

// setupUser decides who the cases run as on this kernel and says it.
func setupUser(opts map[string]string, release string) {
	asRoot = opts["gtrace.as"] == "root"
	tracerCaps = neededCaps(release)
	if asRoot {
		note("cases: gtrace runs as root")
		return
	}
	note("cases: gtrace runs as uid %d holding only %s", caseUID, capList(tracerCaps))
}

// neededCaps: what gtrace needs on a kernel of this release (multi-uprobe links came in
// 6.6; before, gtrace attaches perf-event uprobes).
func neededCaps(release string) []uintptr {
	caps := []uintptr{capBPF, capPerfmon}
	if !kernelAtLeast(release, 6, 6) {
		caps = append(caps, capSysAdmin)
	}
	return caps
}

func kernelAtLeast(release string, major, minor int) bool {
	var a, b int
	fmt.Sscanf(release, "%d.%d", &a, &b)
	return a > major || a == major && b >= minor
}

// asUser: uid 1000 holding caps.
func asUser(caps []uintptr) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: caseUID, Gid: caseUID}, AmbientCaps: caps}
}

// asTracer: how the cases start gtrace (nil: as root).
func asTracer() *syscall.SysProcAttr {
	if asRoot {
		return nil
	}
	return asUser(tracerCaps)
}

// asTarget: attrs for a program a case traces, as uid 1000 unless the cases run as root.
func asTarget(attrs *syscall.SysProcAttr) *syscall.SysProcAttr {
	if asRoot {
		return attrs
	}
	out := syscall.SysProcAttr{}
	if attrs != nil {
		out = *attrs
	}
	out.Credential = &syscall.Credential{Uid: caseUID, Gid: caseUID}
	return &out
}

// capList: "CAP_BPF, CAP_PERFMON".
func capList(caps []uintptr) string {
	var names []string
	for _, c := range caps {
		names = append(names, "CAP_"+capNames[c])
	}
	return strings.Join(names, ", ")
}
