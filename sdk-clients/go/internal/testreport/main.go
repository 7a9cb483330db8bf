// Command testreport reads `go test -json` on its standard input and prints what a plain
// `go test` prints — the output of each test that failed, each package's result line — and
// then every test that skipped, with its reason. It exits 1 when a test or package failed, or
// when a test skipped and WAYMARK_NO_SKIP=1 (set by .ci/run): there a skip would hide a missing
// install step or a broken feature behind a green run, so it fails the run instead.
//
//	go test -json ./... | go run ./internal/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail events
}

type key struct{ pkg, test string }

type skip struct {
	key
	output string
}

func main() {
	failed, skipped, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if len(skipped) > 0 {
		fmt.Printf("\n%d test(s) skipped:\n", len(skipped))
		for _, s := range skipped {
			fmt.Printf("%s %s\n%s", s.pkg, s.test, tail(s.output))
		}
		if os.Getenv("WAYMARK_NO_SKIP") == "1" {
			fmt.Println("a test was skipped, and WAYMARK_NO_SKIP=1 forbids skips")
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// report copies what a plain `go test` would print from the events in r to w, and returns
// whether anything failed and the tests that skipped.
func report(r io.Reader, w io.Writer) (failed bool, skipped []skip, err error) {
	// Each running test's output so far: printed if it fails, dropped if it passes.
	running := map[key]*strings.Builder{}
	var order []key
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			// Not an event (go test's own complaints): pass it on.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		k := key{e.Package, e.Test}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			fmt.Fprintf(w, "FAIL\t%s [build failed]\n", e.ImportPath)
			failed = true
		case e.Test == "":
			// The package's own lines: its result, and what ran outside any test.
			if e.Action == "output" && e.Output != "PASS\n" {
				fmt.Fprint(w, e.Output)
			}
			if e.Action == "fail" {
				failed = true
				// Tests that never ended (a panic, a timeout): their output says why.
				for _, t := range order {
					if b, ok := running[t]; ok && t.pkg == e.Package {
						fmt.Fprint(w, b.String())
						delete(running, t)
					}
				}
			}
		case e.Action == "output":
			b, ok := running[k]
			if !ok {
				b = &strings.Builder{}
				running[k] = b
				order = append(order, k)
			}
			b.WriteString(e.Output)
		case e.Action == "fail":
			failed = true
			if b, ok := running[k]; ok {
				fmt.Fprint(w, b.String())
			}
			delete(running, k)
		case e.Action == "skip":
			out := ""
			if b, ok := running[k]; ok {
				out = b.String()
			}
			skipped = append(skipped, skip{k, out})
			delete(running, k)
		case e.Action == "pass":
			delete(running, k)
		}
	}
	return failed, skipped, sc.Err()
}

// tail is the end of a skipped test's output, indented: its "--- SKIP" line and the lines
// before it, the last of which is the reason t.Skip gave (the test's logs come earlier).
func tail(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	lines = lines[max(0, len(lines)-3):]
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}
