package validate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ncclwiz/ncclwiz/internal/units"
)

// judgeInput is what a verdict needs besides the rung itself.
type judgeInput struct {
	backend   string
	sys       system
	run       procResult
	runErr    error
	parser    *parser
	tolerance float64
	timeout   time.Duration
	nSizes    int
	maxBytes  int64
	shmDir    string
}

// judge fills rr from the parsed output and decides pass or fail.
// Correctness comes first; a missing measurement fails, never passes.
func judge(rr *RungResult, in judgeInput) {
	ps := in.parser
	if ps == nil {
		ps = newParser(rr.Rung.Ranks)
	}
	run := in.run
	rr.ExitCode, rr.Signal, rr.TimedOut, rr.Canceled, rr.Duration = run.ExitCode, run.Signal, run.TimedOut, run.Canceled, run.Duration
	rr.Survivors = run.Survivors
	rr.Transports = ps.transportsOut()
	rr.Sizes = ps.sizesOut()
	if rr.Transports == nil {
		rr.Transports = []Transport{}
	}
	rr.Errors = ps.errors
	rr.NCCLVersion = ps.ncclVersion
	if ps.hasAvg {
		rr.AvgBusBW = ps.avgBW
	}
	for _, s := range rr.Sizes {
		rr.WrongValues += s.Wrong
	}

	var reasons, notes []string
	fail := func(f string, a ...any) { reasons = append(reasons, fmt.Sprintf(f, a...)) }
	note := func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }

	switch {
	case in.runErr != nil:
		fail("could not run the launcher: %v", in.runErr)
	case run.Canceled:
		fail("interrupted: the rung was stopped and its processes ended")
	case run.TimedOut:
		fail("hung: no exit within %s, so the whole process group was ended (%s)", in.timeout, lastProgress(rr.Sizes))
	}

	// Correctness.
	for _, s := range rr.Sizes {
		if s.Checked && !s.OK {
			if s.Wrong > 0 {
				fail("wrong values: %s in %s at %s", units.Count(s.Wrong, "wrong element"), s.Op, FormatBytes(s.Bytes))
			} else {
				fail("a rank reported incorrect results in %s at %s", s.Op, FormatBytes(s.Bytes))
			}
			break
		}
	}
	if len(rr.Errors) > 0 && !run.TimedOut {
		fail("%s", rr.Errors[0])
	}
	if ps.malformed > 0 {
		fail("%d result lines were malformed, so the measurements cannot be trusted", ps.malformed)
	}
	missing := measurementGaps(rr, in, ps)
	reasons = append(reasons, missing...)
	if in.runErr == nil && !run.TimedOut && !run.Canceled && run.ExitCode != 0 {
		if run.Signal != "" {
			fail("the launcher was killed by %s", run.Signal)
		} else {
			fail("the launcher exited with status %d", run.ExitCode)
		}
	}

	// Transports.
	if rr.Rung.Ranks >= 2 {
		r, n := transportVerdict(rr, in.sys, len(rr.Sizes) > 0)
		reasons = append(reasons, r...)
		notes = append(notes, n...)
	}

	// Bandwidth, on the largest all_reduce only.
	large := largestAllReduce(rr.Sizes)
	judgeMin := int64(largeMin)
	if in.maxBytes < judgeMin {
		judgeMin = in.maxBytes
	}
	if large != nil && large.HasBW {
		rr.LargeBytes, rr.LargeBusBW, rr.HasLarge = large.Bytes, large.BusBW, large.Bytes >= judgeMin
	}
	switch {
	case rr.Rung.Ranks < 2:
		rr.Bandwidth = BandwidthVerdict{State: BWNA, Detail: "one rank: bus bandwidth is 0 by definition (busbw = algbw x 2(n-1)/n)"}
	case rr.HasLarge && in.maxBytes < largeMin:
		// The user asked for small messages only; latency dominates them.
		rr.Bandwidth = BandwidthVerdict{State: BWNotJudged, Detail: fmt.Sprintf("the sizes stop at %s; bandwidth is judged on messages of %s or more only",
			FormatBytes(in.maxBytes), FormatBytes(largeMin))}
	case !rr.HasLarge:
		rr.Bandwidth = BandwidthVerdict{State: BWMissing, Detail: fmt.Sprintf("no all_reduce measurement at %s or more", FormatBytes(judgeMin))}
		if len(missing) == 0 { // otherwise already said as missing measurements
			fail("bandwidth unproven: %s", rr.Bandwidth.Detail)
		}
	default:
		exp, why := expectationFor(in.sys, effectiveTransport(rr.Transports))
		rr.Expected = exp
		if exp == nil {
			rr.Bandwidth = BandwidthVerdict{State: BWNotJudged, Detail: why}
			break
		}
		thr := in.tolerance * exp.Low
		rr.Bandwidth.Threshold = thr
		at := fmt.Sprintf("busbw %s at %s", formatBW(rr.LargeBusBW, true), FormatBytes(rr.LargeBytes))
		switch {
		case rr.LargeBusBW < thr:
			rr.Bandwidth.State = BWLow
			rr.Bandwidth.Detail = fmt.Sprintf("%s is below %s GB/s, %.0f%% of the low end of %s expected for %s (%s)",
				at, trimFloat(round1(thr)), in.tolerance*100, exp.Range(), exp.System, exp.Source)
			fail("bandwidth too low: %s", rr.Bandwidth.Detail)
		case rr.LargeBusBW < typicalFactor*exp.Low:
			rr.Bandwidth.State = BWBelow
			rr.Bandwidth.Detail = fmt.Sprintf("%s is under the typical %s for %s but above the %s GB/s floor; peaks need ≥1 GB messages",
				at, exp.Range(), exp.System, trimFloat(round1(thr)))
			note("%s", rr.Bandwidth.Detail)
		default:
			rr.Bandwidth.State = BWOK
			rr.Bandwidth.Detail = fmt.Sprintf("%s is within what %s reaches (%s)", at, exp.System, exp.Range())
		}
	}

	// Hygiene: what the run left behind.
	if len(rr.LeftoverShm) > 0 {
		var names []string
		for _, e := range rr.LeftoverShm {
			names = append(names, fmt.Sprintf("%s (%s)", e.Name, FormatBytes(e.Size)))
		}
		note("NCCL left %s in %s: %s; `ncclwiz check` classifies them and `ncclwiz fix` removes orphaned ones with your consent",
			units.Count(len(rr.LeftoverShm), "segment"), in.shmDir, strings.Join(names, ", "))
	}
	if len(run.Survivors) > 0 {
		var ps []string
		for _, p := range run.Survivors {
			d := fmt.Sprintf("%d %s (%s)", p.PID, p.Comm, p.Why)
			if p.Command != "" {
				d += ": " + p.Command
			}
			ps = append(ps, d)
		}
		note("%s of this rung still ran when it ended and had to be killed: %s", units.Count(len(run.Survivors), "process", "processes"), strings.Join(ps, "; "))
	}
	if len(run.Leftover) > 0 {
		var ps []string
		for _, p := range run.Leftover {
			ps = append(ps, fmt.Sprintf("%d %s", p.PID, p.Comm))
		}
		fail("could not end %s of the run (they may still hold GPUs): %s", units.Count(len(run.Leftover), "process", "processes"), strings.Join(ps, ", "))
	}
	rr.Reasons = append(rr.Reasons, reasons...)
	rr.Notes = append(rr.Notes, notes...)
	rr.Status = Pass
	if len(rr.Reasons) > 0 {
		rr.Status = Fail
	}
}

// measurementGaps lists what should have been measured and was not, in
// at most two lines (one for missing sizes, one for missing ranks).
func measurementGaps(rr *RungResult, in judgeInput, ps *parser) []string {
	var out []string
	if in.runErr != nil {
		return nil
	}
	switch in.backend {
	case BackendTorchrun:
		var gaps []string
		partial := ""
		for _, op := range []string{"all_reduce", "all_gather"} {
			n := 0
			for _, s := range rr.Sizes {
				if s.Op != op {
					continue
				}
				n++
				if s.Ranks < rr.Rung.Ranks && partial == "" {
					partial = fmt.Sprintf("only %d of %d ranks reported %s at %s", s.Ranks, rr.Rung.Ranks, op, FormatBytes(s.Bytes))
				}
			}
			if n < in.nSizes {
				gaps = append(gaps, fmt.Sprintf("%s %d of %d sizes", op, n, in.nSizes))
			}
		}
		if len(gaps) > 0 {
			out = append(out, "missing measurements: "+strings.Join(gaps, ", ")+" reported")
		}
		if partial != "" {
			out = append(out, partial)
		}
		if len(ps.dones) < rr.Rung.Ranks && len(out) == 0 {
			out = append(out, fmt.Sprintf("only %d of %d ranks finished (barrier and teardown)", len(ps.dones), rr.Rung.Ranks))
		}
	case BackendNCCLTests:
		if len(rr.Sizes) == 0 {
			out = append(out, "missing measurements: all_reduce_perf printed no result rows")
			break
		}
		for _, s := range rr.Sizes {
			if !s.Checked {
				out = append(out, fmt.Sprintf("correctness unknown: #wrong is N/A at %s (validation off)", FormatBytes(s.Bytes)))
				break
			}
		}
		switch {
		case ps.oob == nil:
			out = append(out, "missing the 'Out of bounds values' summary: the run did not finish")
		case *ps.oob > 0:
			out = append(out, fmt.Sprintf("nccl-tests counted %d out-of-bounds (wrong) values", *ps.oob))
		}
	}
	return out
}

// transportVerdict checks the transports NCCL reported against what the
// rung's environment and the hardware allow (reference §5, "Diagnostic
// readings").
func transportVerdict(rr *RungResult, sys system, measured bool) (reasons, notes []string) {
	env := map[string]string{}
	for _, kv := range rr.Rung.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	p2pOff := env["NCCL_P2P_DISABLE"] == "1"
	shmOff := env["NCCL_SHM_DISABLE"] == "1"
	seen := map[string]bool{}
	net := ""
	for _, t := range rr.Transports {
		seen[t.Class] = true
		if strings.HasPrefix(t.Class, "NET") && net == "" {
			net = t.Class
		}
	}
	used := transportList(rr.Transports)
	if len(rr.Transports) == 0 {
		if measured {
			reasons = append(reasons, "NCCL printed no transport lines although NCCL_DEBUG=INFO was set, so the path tested is unknown")
		}
		return reasons, notes
	}
	if seen["P2P"] && p2pOff {
		reasons = append(reasons, "NCCL used P2P although NCCL_P2P_DISABLE=1: the setting did not reach NCCL (an nccl.conf, or a wrapper resetting the environment?)")
	}
	if seen["SHM"] && shmOff {
		reasons = append(reasons, "NCCL used shared memory although NCCL_SHM_DISABLE=1: the setting did not reach NCCL")
	}
	switch rr.Rung.ID {
	case RungSHM:
		if !seen["SHM"] {
			reasons = append(reasons, "no shared-memory connection: NCCL used "+used+" instead")
		}
	case RungNet:
		if net == "" {
			reasons = append(reasons, "no network connection: NCCL used "+used+" instead")
		}
	}
	if net != "" && !shmOff {
		reasons = append(reasons, "ranks on this one machine connected over the network ("+net+") although shared memory was allowed: "+
			"NCCL did not see them as one host, or they do not share /dev/shm (separate containers)")
	}
	if rr.Rung.ID == RungAll || rr.Rung.ID == RungFix {
		switch {
		case sys.Known && sys.AllNVLink && !p2pOff && !seen["P2P"]:
			reasons = append(reasons, "NVLink connects these GPUs but NCCL did not use P2P (it used "+used+"): "+
				"P2P is disabled by configuration or blocked (containers isolating GPUs, ACS/IOMMU)")
		case sys.Known && sys.AllNVLink && p2pOff:
			notes = append(notes, "the candidate environment turns P2P off, so NVLink goes unused; the A/B table shows what that costs")
		case sys.Known && !sys.AnyNVLink && seen["SHM"] && !seen["P2P"] && !p2pOff && sys.Consumer:
			notes = append(notes, "NCCL used shared memory, not P2P: GeForce drivers usually keep P2P off "+
				"(P2P on RTX 4090 needs a patched driver, https://github.com/tinygrad/open-gpu-kernel-modules/issues/36), so this is expected")
		case sys.Known && !sys.AnyNVLink && seen["SHM"] && !seen["P2P"] && !p2pOff:
			notes = append(notes, "NCCL used shared memory, not P2P, between these PCIe GPUs: P2P is unsupported or blocked here (ACS/IOMMU, virtualisation)")
		}
	}
	return reasons, notes
}

// effectiveTransport is the slowest class NCCL used: a ring is as fast as
// its slowest hop.
func effectiveTransport(ts []Transport) string {
	best, rank := "", -1
	for _, t := range ts {
		r := 0
		switch {
		case strings.HasPrefix(t.Class, "NET"), t.Class == "COLLNET":
			r = 3
		case t.Class == "SHM":
			r = 2
		case t.Class == "P2P":
			r = 1
		}
		if r > rank {
			best, rank = t.Class, r
		}
	}
	return best
}

func largestAllReduce(sizes []SizeResult) *SizeResult {
	var out *SizeResult
	for i := range sizes {
		s := &sizes[i]
		if s.Op == "all_reduce" && (out == nil || s.Bytes > out.Bytes) {
			out = s
		}
	}
	return out
}

func lastProgress(sizes []SizeResult) string {
	if len(sizes) == 0 {
		return "before any collective completed"
	}
	s := sizes[len(sizes)-1]
	return fmt.Sprintf("last completed: %s at %s", s.Op, FormatBytes(s.Bytes))
}

// compareAB sets the candidate rung beside its baseline (all, or single on
// one GPU).
func compareAB(rungs []RungResult, env []string) *ABComparison {
	var cand, base *RungResult
	for i := range rungs {
		switch rungs[i].Rung.ID {
		case RungFix:
			cand = &rungs[i]
		case RungAll:
			base = &rungs[i]
		}
	}
	if cand == nil || cand.Status == Skipped {
		return nil
	}
	if base == nil || base.Status == Skipped {
		for i := range rungs {
			if rungs[i].Rung.ID == RungSingle && cand.Rung.Ranks == 1 {
				base = &rungs[i]
			}
		}
	}
	if base == nil || base.Status == Skipped {
		return nil
	}
	ab := &ABComparison{Base: base.Rung.ID, Candidate: cand.Rung.ID, Env: env}
	row := func(m string, f func(*RungResult) string) {
		ab.Rows = append(ab.Rows, ABRow{Metric: m, Without: f(base), With: f(cand)})
	}
	row("result", func(r *RungResult) string { return string(r.Status) })
	row("transports", func(r *RungResult) string { return transportList(r.Transports) })
	row("busbw, largest all_reduce", func(r *RungResult) string {
		if !r.HasLarge {
			return "-"
		}
		return formatBW(r.LargeBusBW, true) + " at " + FormatBytes(r.LargeBytes)
	})
	row("bandwidth verdict", func(r *RungResult) string { return r.Bandwidth.State })
	row("wrong values", func(r *RungResult) string { return fmt.Sprint(r.WrongValues) })
	row("first error", func(r *RungResult) string {
		if len(r.Errors) == 0 {
			return "none"
		}
		return clip(r.Errors[0], 60)
	})
	row("leftover /dev/shm segments", func(r *RungResult) string { return fmt.Sprint(len(r.LeftoverShm)) })
	row("duration", func(r *RungResult) string { return r.Duration.Round(100 * time.Millisecond).String() })

	e := strings.Join(env, " ")
	switch {
	case base.Status == Fail && cand.Status == Pass:
		ab.Verdict = fmt.Sprintf("The candidate environment fixes it: without it the %s rung fails (%s); with %s it passes.", base.Rung.ID, clip(base.Summary(), 120), e)
		if base.HasLarge && cand.HasLarge {
			ab.Verdict += " " + bwChange(base.LargeBusBW, cand.LargeBusBW)
		}
	case base.Status == Pass && cand.Status == Pass:
		ab.Verdict = "Both pass. " + bwChange(base.LargeBusBW, cand.LargeBusBW)
		if !base.HasLarge || !cand.HasLarge {
			ab.Verdict = "Both pass."
		}
	case base.Status == Pass && cand.Status == Fail:
		ab.Verdict = fmt.Sprintf("The candidate environment breaks a working setup: with %s the rung fails (%s).", e, clip(cand.Summary(), 120))
	default:
		ab.Verdict = fmt.Sprintf("Neither passes: the candidate environment does not fix it (%s).", clip(cand.Summary(), 120))
	}
	return ab
}

func bwChange(a, b float64) string {
	if a <= 0 {
		return ""
	}
	d := (b - a) / a
	switch {
	case d < -0.1:
		return fmt.Sprintf("It costs bandwidth: busbw %s -> %s (%.0f%%).", formatBW(a, true), formatBW(b, true), d*100)
	case d > 0.1:
		return fmt.Sprintf("It raises bandwidth: busbw %s -> %s (+%.0f%%).", formatBW(a, true), formatBW(b, true), d*100)
	}
	return fmt.Sprintf("Bandwidth is about the same (%s -> %s).", formatBW(a, true), formatBW(b, true))
}

// overall is the run's verdict: it passes only if every rung that ran
// passed and nothing was interrupted.
func overall(res *Result) (bool, string) {
	var ran, failed, skipped []string
	for _, r := range res.Rungs {
		switch r.Status {
		case Pass:
			ran = append(ran, r.Rung.ID)
		case Fail:
			ran = append(ran, r.Rung.ID)
			failed = append(failed, r.Rung.ID)
		case Skipped:
			skipped = append(skipped, r.Rung.ID)
		}
	}
	sort.Strings(skipped)
	var b strings.Builder
	pass := len(failed) == 0 && len(ran) > 0 && !res.Interrupted
	switch {
	case len(ran) == 0:
		b.WriteString("no rung ran")
	case len(failed) == 0:
		fmt.Fprintf(&b, "all %d rungs passed (%s)", len(ran), strings.Join(ran, ", "))
	default:
		fmt.Fprintf(&b, "%d of %d rungs failed: %s", len(failed), len(ran), strings.Join(failed, ", "))
	}
	if res.Interrupted {
		b.WriteString("; interrupted before the end")
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "; skipped: %s", strings.Join(skipped, ", "))
	}
	return pass, b.String()
}

// FormatBytes renders a byte count with binary units (256 MiB).
func FormatBytes(n int64) string {
	if n < 0 {
		return fmt.Sprintf("%d B", n)
	}
	return units.Bytes(uint64(n))
}

// FormatSizeArg renders a size for nccl-tests' -b/-e (256M, 1G, 8).
func FormatSizeArg(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

func formatBW(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f GB/s", v)
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func transportList(ts []Transport) string {
	if len(ts) == 0 {
		return "-"
	}
	var out []string
	for _, t := range ts {
		out = append(out, t.Via)
	}
	return strings.Join(out, " + ")
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
