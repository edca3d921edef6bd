// The end-to-end cases that trace one program started by gtrace (-c): each the twin of a
// host test (tests/e2e.rs, goroutines.rs, lines.rs, panics.rs, gomaps.rs,
// production.rs), with the same Go program and the same comparison with its own truth.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

func caseEntry() error {
	r, err := trace("on entry main.add { @calls = count(); @sum = sum(a) }", "e2e add 1000")
	if err != nil {
		return err
	}
	return first(sameAsTruth(r, "@calls", "calls"), sameAsTruth(r, "@sum", "sum_a"))
}

func caseReturnHist() error {
	r, err := trace("on return main.sleepy < hist(elapsed) >; on return main.sleepy { @n = count() }", "e2e sleep 20")
	if err != nil {
		return err
	}
	if err := sameAsTruth(r, "@n", "calls"); err != nil {
		return err
	}
	calls, _ := truth(r.stdout, "calls")
	labels, total := histogram(r.stdout, "@[main.sleepy]:")
	if total != calls {
		return fmt.Errorf("the histogram holds %d calls, the program made %d: %v", total, calls, r)
	}
	for _, l := range labels {
		// Every call slept 2ms: no bucket may start below 1ms.
		if !strings.Contains(l, "ms") || strings.HasPrefix(l, "0") {
			return fmt.Errorf("bucket [%s) is below the 2ms sleep: %v", l, r)
		}
	}
	return nil
}

func casePrintf() error {
	r, err := trace(`on entry main.add { printf("a=%d b=%d\n", a, b) }`, "e2e add 100")
	if err != nil {
		return err
	}
	var got []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "a=") {
			got = append(got, l)
		}
	}
	for i := 0; i < 100; i++ {
		want := fmt.Sprintf("a=%d b=1", i)
		if i >= len(got) || got[i] != want {
			return fmt.Errorf("event %d is not %q: %v", i, want, r)
		}
	}
	if len(got) != 100 {
		return fmt.Errorf("%d events for 100 calls: %v", len(got), r)
	}
	return nil
}

func caseStackGrowth() error {
	r, err := trace("on entry main.grow { @entries = count() } on return main.grow { @returns = count(); @lat = max(elapsed) }",
		"e2e grow 2000")
	if err != nil {
		return err
	}
	return first(sameAsTruth(r, "@entries", "calls"), sameAsTruth(r, "@returns", "calls"))
}

// caseArith: signed % and / on negative values (tests/go/e2e's small mode passes
// x = int8(-i % 100)), against Go's own arithmetic over the calls the program made.
func caseArith() error {
	r, err := trace("on entry main.small8 { @mod = sum(x % 7); @div = sum(x / 3); @n = count() }", "e2e small 200")
	if err != nil {
		return err
	}
	calls, err := truth(r.stdout, "calls")
	if err != nil {
		return err
	}
	var mod, div int64
	for i := int64(0); i < calls; i++ {
		x := int8(-i % 100)
		mod, div = mod+int64(x%7), div+int64(x/3)
	}
	r.stdout += fmt.Sprintf("\nwant_mod=%d want_div=%d", mod, div)
	return first(sameAsTruth(r, "@n", "calls"), sameAsTruth(r, "@mod", "want_mod"), sameAsTruth(r, "@div", "want_div"))
}

func caseSelf() error {
	r, err := trace("on entry main.work { self.id = id } on return main.work { if self.id == ret { @match = count() } else { @mismatch = count() } }",
		"goroutines gosched 2000")
	if err != nil {
		return err
	}
	if n, ok := mapValue(r.stdout, "@mismatch"); ok {
		return fmt.Errorf("%d returns saw another goroutine's self.id: %v", n, r)
	}
	return sameAsTruth(r, "@match", "calls")
}

// lineOf: the line of tests/go/lines/main.go (copied to /src/lines.go) marked `// L:name`.
func lineOf(name string) (int, error) {
	data, err := os.ReadFile("/src/lines.go")
	if err != nil {
		return 0, err
	}
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasSuffix(strings.TrimRight(l, " \t"), "// L:"+name) {
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("no // L:%s in tests/go/lines/main.go", name)
}

func caseLine() error {
	counted := []string{"header", "body", "after", "range", "rangebody", "rangeafter", "stacked", "inlined", "closure"}
	script := ""
	for _, n := range counted {
		line, err := lineOf(n)
		if err != nil {
			return err
		}
		script += fmt.Sprintf("on line \"main.go:%d\" { @%s = count() }\n", line, n)
	}
	r, err := trace(script, "lines 60")
	if err != nil {
		return err
	}
	for _, n := range counted {
		if err := sameAsTruth(r, "@"+n, n); err != nil {
			return err
		}
	}
	return nil
}

const panicTraced = "main.boom, main.guard, main.inner, main.middle, main.outer, main.deferer, main.thrower, " +
	"main.rethrow, main.twice, main.selfish, main.exiter, main.doomed, main.deeper"

func casePanic() error {
	script := "on panic " + panicTraced + ` {
    printf("want %s recovered=%v panic=%v\n", func, recovered, panic)
    @elapsed_ok[elapsed > 0] = count()
}`
	r, err := trace(script, "panics mix 25")
	if err != nil {
		return err
	}
	wants, fired := map[string]int64{}, map[string]int64{}
	var calls int64
	for _, l := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(l, "want ") {
			continue
		}
		if what, n, ok := strings.Cut(l, " count="); ok {
			var c int64
			fmt.Sscan(n, &c)
			wants[what] += c
			calls += c
		} else {
			fired[l]++
		}
	}
	if len(wants) == 0 {
		return fmt.Errorf("the program printed no truth: %v", r)
	}
	if d := mapDiff(wants, fired); d != "" {
		return fmt.Errorf("on panic fired otherwise than the program says: %s", d)
	}
	ok, _ := mapValue(r.stdout, "@elapsed_ok[true]")
	if ok != calls {
		return fmt.Errorf("@elapsed_ok[true] is %d for %d calls: %v", ok, calls, r)
	}
	return nil
}

// mapDiff: the keys whose counts differ, as "key: want W, got G", sorted; "" if none.
func mapDiff(want, got map[string]int64) string {
	var diffs []string
	for k, w := range want {
		if got[k] != w {
			diffs = append(diffs, fmt.Sprintf("%q: want %d, got %d", k, w, got[k]))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q: want 0, got %d", k, g))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// Two lookups of tests/go/gomaps whose maps a probe sees whole (not the huge and growing
// ones, where a lookup may be skipped and said so): string keys in small and big maps,
// int32 keys. (Each m[k] program takes the verifier seconds under TCG: two, not all.)
const gomapScript = `
on entry main.lookupStr { printf("gt str %s %s %d\n", tag, k, m[k]) }
on entry main.lookupSmall { printf("gt small %s %d %d\n", tag, k, m[k]) }
`

func caseGoMap() error {
	r, err := trace(gomapScript, "gomaps")
	if err != nil {
		return err
	}
	ours, theirs := map[string]int64{}, map[string]int64{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if rest, ok := strings.CutPrefix(l, "gt "); ok {
			ours[rest]++
		} else if rest, ok := strings.CutPrefix(l, "go "); ok {
			kind, _, _ := strings.Cut(rest, " ")
			if contains([]string{"str", "small"}, kind) {
				theirs[rest]++
			}
		}
	}
	if len(theirs) < 10 {
		return fmt.Errorf("the program printed too little: %v", r)
	}
	if d := mapDiff(theirs, ours); d != "" {
		// What gtrace said besides (its line of losses names lookups it skipped).
		return fmt.Errorf("m[k] read otherwise than the program found: %s (gtrace said: %s)", d, lastLines(r.stderr, 3))
	}
	return nil
}

// caseBudget: --budget 1% detaches main.hot from the probe it shares with main.cold (it
// reads the kernel's run time of each program, which is what differs between kernels)
// and says so at exit; the program runs on and prints its truth. Where the kernel has
// multi-uprobe links, the probe's link is handed over to one without main.hot while
// main.cold is called, so main.cold's count is exact only if the handover neither missed
// nor double-counted a hit on this kernel. Under TCG a trap the kernel single-steps can
// cost milliseconds, so main.cold may cross the budget too (cut, or duty-cycled with
// main.hot's cut sites gone); then its count is partial and said so.
func caseBudget() error {
	r, err := trace("on entry main.hot, main.cold { @[func] = count() }",
		"prod hotcold 1000000 20000", "--budget", "1%")
	if err != nil {
		return err
	}
	// The line of losses at exit: "detached by --budget 1%: on entry main.hot, main.cold
	// at main.hot", after what stayed and was duty-cycled when that crossed the budget
	// too ("duty-cycled by --budget from 1.4s, ...: on entry ...; detached by ...").
	var detached string
	for _, l := range strings.Split(r.stderr, "\n") {
		if _, rest, ok := strings.Cut(l, "detached by --budget 1%: "); ok {
			detached, _, _ = strings.Cut(rest, ";")
		}
	}
	cycled := strings.Contains(r.stderr, "duty-cycled by --budget from ")
	_, at, _ := strings.Cut(detached, " at ")
	if !strings.Contains(at, "main.hot") {
		return fmt.Errorf("the budget did not detach main.hot: %v", r)
	}
	hot, err := truth(r.stdout, "hot_calls")
	if err != nil {
		return err
	}
	if counted, _ := mapValue(r.stdout, "@[main.hot]"); counted <= 0 || counted >= hot {
		return fmt.Errorf("%d of %d hot calls counted: %v", counted, hot, r)
	}
	if !strings.Contains(at, "main.cold") && !cycled {
		return sameAsTruth(r, "@[main.cold]", "cold_calls")
	}
	note("budget: main.cold cost more than 1%% here too: %s", firstLines(r.stderr, 2))
	cold, _ := truth(r.stdout, "cold_calls")
	counted, _ := mapValue(r.stdout, "@[main.cold]")
	if counted > cold || !strings.Contains(r.stdout, "@[main.cold]: ") || !strings.Contains(r.stdout, "(partial: ") {
		return fmt.Errorf("%d of %d cold calls counted, not said partial: %v", counted, cold, r)
	}
	return nil
}

func caseStats() error {
	r, err := trace("on entry main.record { @n = count() }", "prod keys 2000", "--stats", "-f", "json")
	if err != nil {
		return err
	}
	calls, err := truth(r.stdout, "calls")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		var v struct {
			Type   string
			Probes []struct {
				Hits   int64
				CostNs float64 `json:"cost_ns"`
			}
		}
		if json.Unmarshal([]byte(l), &v) != nil || v.Type != "stats" {
			continue
		}
		if len(v.Probes) != 1 || v.Probes[0].Hits != calls || v.Probes[0].CostNs <= 0 {
			return fmt.Errorf("--stats says %+v for %d calls", v.Probes, calls)
		}
		return nil
	}
	return fmt.Errorf("no stats object: %v", r)
}

// caseUstack: the kernel's walk of the Go stack (bpf_get_stack over Go's frame
// pointers), as tests/e2e.rs checks it on the host: tests/go/e2e's grow(3) on four
// goroutines recurses to grow(0), whose stack is grow four times under the goroutine's
// function, one stack counted four times.
func caseUstack() error {
	r, err := trace("on entry main.grow { if n == 0 { @[ustack] = count() } }", "e2e grow 3")
	if err != nil {
		return err
	}
	var names []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "    ") {
			name, _, _ := strings.Cut(strings.TrimSpace(l), "+")
			names = append(names, name)
		}
	}
	want := []string{"main.grow", "main.grow", "main.grow", "main.grow", "main.main.func1"}
	if len(names) < len(want) || strings.Join(names[:len(want)], " ") != strings.Join(want, " ") {
		return fmt.Errorf("the stack is not grow x4 under main.main.func1: %v", r)
	}
	if !strings.Contains(r.stdout, "]: 4") {
		return fmt.Errorf("four goroutines took the same path, not counted 4: %v", r)
	}
	return nil
}
