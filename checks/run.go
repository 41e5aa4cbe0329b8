package checks

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// DefaultTimeout bounds one check when it sets no Timeout of its own.
const DefaultTimeout = 10 * time.Second

// Result is what one check produced.
type Result struct {
	ID       string        `json:"id"`
	Title    string        `json:"title"`
	Category string        `json:"category"`
	Findings []Finding     `json:"findings"`
	Duration time.Duration `json:"-"`
	// Panicked is set when the check crashed; its finding says so.
	Panicked bool `json:"-"`
}

// Worst returns the most severe finding's severity (Skipped ranks below
// Warn and Error, above Info and OK).
func (r Result) Worst() Severity {
	worst := OK
	for _, f := range r.Findings {
		if f.Severity.Rank() < worst.Rank() {
			worst = f.Severity
		}
	}
	return worst
}

// Options tune a run.
type Options struct {
	// Concurrency caps checks running at once; 0 means 4.
	Concurrency int
	// Timeout is the default per-check timeout; 0 means DefaultTimeout.
	Timeout time.Duration
	// OnResult, if set, is called (serially) as each check finishes, so a
	// UI can stream results.
	OnResult func(Result)
	// OnStart, if set, is called (serially) when a check starts.
	OnStart func(Check)
}

// Run executes the checks concurrently and returns their results in the
// order given. A check that errors, times out or panics yields a finding
// that says so; the other checks are not affected.
func Run(ctx context.Context, h *host.Host, cs []Check, opts Options) []Result {
	conc := opts.Concurrency
	if conc <= 0 {
		conc = 4
	}
	results := make([]Result, len(cs))
	sem := make(chan struct{}, conc)
	var mu sync.Mutex // serialises callbacks
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = cancelled(cs[i], ctx.Err())
				report(&mu, opts.OnResult, results[i])
				return
			}
			defer func() { <-sem }()
			if opts.OnStart != nil {
				mu.Lock()
				opts.OnStart(cs[i])
				mu.Unlock()
			}
			results[i] = runOne(ctx, h, cs[i], opts.Timeout)
			report(&mu, opts.OnResult, results[i])
		}(i)
	}
	wg.Wait()
	return results
}

func report(mu *sync.Mutex, f func(Result), r Result) {
	if f == nil {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	f(r)
}

func cancelled(c Check, err error) Result {
	return Result{ID: c.ID, Title: c.Title, Category: c.Category, Findings: []Finding{{
		Check: c.ID, Severity: Skipped, Title: c.Title + ": not run", Detail: "cancelled: " + err.Error(),
	}}}
}

// RunOne runs a single check with the engine's protections; the fixes use it
// to re-check after applying.
func RunOne(ctx context.Context, h *host.Host, c Check) Result {
	return runOne(ctx, h, c, 0)
}

func runOne(ctx context.Context, h *host.Host, c Check, def time.Duration) Result {
	res := Result{ID: c.ID, Title: c.Title, Category: c.Category}
	for _, n := range c.Needs {
		if n == NeedRoot && !h.IsRoot() {
			res.Findings = []Finding{{Check: c.ID, Severity: Skipped, Title: c.Title + ": skipped", Detail: "needs root (run with sudo to include it)"}}
			return res
		}
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = def
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	type outcome struct {
		fs       []Finding
		err      error
		panicked bool
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		defer func() {
			if p := recover(); p != nil {
				stack := string(debug.Stack())
				done <- outcome{err: fmt.Errorf("panic: %v\n%s", p, firstFrames(stack, 12)), panicked: true}
			}
		}()
		fs, err := c.Run(cctx, h)
		done <- outcome{fs: fs, err: err}
	}()

	select {
	case o := <-done:
		res.Duration = time.Since(start)
		switch {
		case o.panicked:
			res.Panicked = true
			res.Findings = []Finding{{Check: c.ID, Severity: Error, Incomplete: true, Title: c.Title + ": internal error in ncclwiz",
				Detail: "The check crashed; its result is unknown. Please report this with the text below.\n" + o.err.Error()}}
		case o.err != nil:
			res.Findings = append(normalise(c, o.fs), Finding{Check: c.ID, Severity: Skipped, Incomplete: true, Title: c.Title + ": could not complete", Detail: o.err.Error()})
		default:
			res.Findings = normalise(c, o.fs)
		}
	case <-cctx.Done():
		res.Duration = time.Since(start)
		why := "timed out after " + timeout.String()
		if ctx.Err() != nil {
			why = "cancelled"
		}
		res.Findings = []Finding{{Check: c.ID, Severity: Skipped, Incomplete: true, Title: c.Title + ": " + why,
			Detail: "The check did not finish in time; something it reads may be hanging (an NFS mount, a stuck driver)."}}
	}
	return res
}

// normalise fills in the check ID and guarantees at least one finding, so a
// check never vanishes from a report.
func normalise(c Check, fs []Finding) []Finding {
	if len(fs) == 0 {
		return []Finding{{Check: c.ID, Severity: OK, Title: c.Title + ": ok"}}
	}
	out := make([]Finding, len(fs))
	for i, f := range fs {
		if f.Check == "" {
			f.Check = c.ID
		}
		out[i] = f
	}
	return out
}

func firstFrames(stack string, n int) string {
	lines := strings.Split(stack, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// Flatten returns every finding of the results, in order.
func Flatten(rs []Result) []Finding {
	var out []Finding
	for _, r := range rs {
		out = append(out, r.Findings...)
	}
	return out
}

// ExitCode maps findings to the process exit code: 1 when any warning or
// error was found, else 0.
func ExitCode(rs []Result) int {
	for _, r := range rs {
		for _, f := range r.Findings {
			if f.Severity.IsProblem() {
				return 1
			}
		}
	}
	return 0
}
