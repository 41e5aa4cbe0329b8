package explain

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Metamorphic tests: every log of the development corpus, changed the way
// logs are changed on their way to a bug report (re-wrapped, joined,
// abridged, quoted, indented, prefixed differently, coloured, cut,
// interleaved with another rank's output), must keep its root cause or a
// declared weaker one, and never turn into an all-clear. The RNG is seeded
// per log and perturbation, so a failure names what reproduces it.

// perturbation changes the lines of one input.
type perturbation struct {
	name string
	fn   func(r *rand.Rand, lines []string) []string
}

var (
	reStampField = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?|[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+|\d{2}:\d{2}:\d{2}(?:\.\d+)?`)
	reNumField   = regexp.MustCompile(`\b(?:0x[0-9a-fA-F]+|\d{3,})\b`)
	reLauncherP  = regexp.MustCompile(`^(?:\[(?:rank\d+|default\d+|\d+,\d+)\](?:<std\w+>)?: ?|\d{1,4}: |\([\w.\-]+ pid=\d+(?:, ip=[\d.]+)?\) )`)
	reRankP      = regexp.MustCompile(`^\[rank(\d+)\]: ?`)
	reURL        = regexp.MustCompile(`https?://[^\s)>\]"']+[^\s)>\]"'.,:;]`)
)

var perturbations = []perturbation{
	{"rewrap-width", func(r *rand.Rand, lines []string) []string {
		w := 60 + r.IntN(140)
		var out []string
		for _, l := range lines {
			for len(l) > w {
				out, l = append(out, l[:w]), l[w:]
			}
			out = append(out, l)
		}
		return out
	}},
	{"rewrap-punct", func(r *rand.Rand, lines []string) []string {
		var out []string
		for _, l := range lines {
			if len(l) < 50 || r.IntN(2) == 0 {
				out = append(out, l)
				continue
			}
			// Break right after a colon or comma in the second half.
			cut := -1
			for i := len(l) / 2; i < len(l)-1; i++ {
				if l[i] == ':' || l[i] == ',' {
					cut = i + 1
					break
				}
			}
			if cut < 0 {
				out = append(out, l)
				continue
			}
			out = append(out, l[:cut], strings.TrimLeft(l[cut:], " "))
		}
		return out
	}},
	{"join", func(r *rand.Rand, lines []string) []string {
		// A paste that lost its newlines in one place: 2 to 5 lines run
		// together with spaces.
		if len(lines) < 3 {
			return lines
		}
		k := 2 + r.IntN(4)
		i := r.IntN(len(lines) - 1)
		j := min(len(lines), i+k)
		out := append([]string{}, lines[:i]...)
		out = append(out, strings.Join(lines[i:j], " "))
		return append(out, lines[j:]...)
	}},
	{"elide", func(r *rand.Rand, lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			l = reStampField.ReplaceAllString(l, "...")
			if r.IntN(3) == 0 {
				l = reNumField.ReplaceAllStringFunc(l, func(s string) string {
					if r.IntN(2) == 0 {
						return "..."
					}
					return s
				})
			}
			out[i] = l
		}
		return out
	}},
	{"strip-prefix", func(r *rand.Rand, lines []string) []string {
		return mapLines(lines, func(l string) string { return reLauncherP.ReplaceAllString(l, "") })
	}},
	{"change-prefix", func(r *rand.Rand, lines []string) []string {
		// torchrun's [rankN]: becomes srun's "N: ".
		return mapLines(lines, func(l string) string { return reRankP.ReplaceAllString(l, "$1: ") })
	}},
	{"indent", func(r *rand.Rand, lines []string) []string {
		ind := []string{"    ", "\t", "  "}[r.IntN(3)]
		return mapLines(lines, func(l string) string { return ind + l })
	}},
	{"quote", func(r *rand.Rand, lines []string) []string {
		return mapLines(lines, func(l string) string { return "> " + l })
	}},
	{"crlf", func(r *rand.Rand, lines []string) []string {
		return mapLines(lines, func(l string) string { return l + "\r" })
	}},
	{"ansi", func(r *rand.Rand, lines []string) []string {
		out := make([]string, len(lines))
		for i, l := range lines {
			switch r.IntN(3) {
			case 0:
				out[i] = "\x1b[31m" + l + "\x1b[0m"
			case 1:
				// Colour one word in the middle.
				if j := strings.IndexByte(l, ' '); j > 0 {
					out[i] = "\x1b[1;33m" + l[:j] + "\x1b[0m" + l[j:]
					continue
				}
				out[i] = l
			default:
				out[i] = l
			}
		}
		return out
	}},
	{"cut-ends", nil}, // set in TestMetamorphic: it needs the evidence lines
	{"interleave", func(r *rand.Rand, lines []string) []string {
		// Another rank's progress printed between the lines (not among
		// the last ones: a job that goes on printing did not stop).
		other := []string{
			"[rank7]:step %d loss 2.%03d lr 3.0e-04 tok/s 41%03d",
			"[default7]:epoch 3 iter %d/5000 eta 1:0%d:%02d",
			"INFO 11-04 10:%02d:%02d [engine.py:%d] Avg generation throughput: 812.4 tokens/s",
		}
		var out []string
		for i, l := range lines {
			out = append(out, l)
			if i < len(lines)-5 && r.IntN(3) == 0 {
				f := other[r.IntN(len(other))]
				out = append(out, fmt.Sprintf(f, r.IntN(60), r.IntN(60), r.IntN(999)))
			}
		}
		return out
	}},
	{"pad-right", func(r *rand.Rand, lines []string) []string {
		// A console's copy of its screen buffer (Windows conhost, tmux
		// capture-pane -J without -N): every row right-padded with spaces
		// to the terminal width, a long line to a multiple of it.
		w := []int{80, 120, 160, 200}[r.IntN(4)]
		out := make([]string, len(lines))
		for i, l := range lines {
			n := max(1, (len(l)+w-1)/w) * w
			out[i] = l + strings.Repeat(" ", n-len(l))
		}
		return out
	}},
	{"first-stamp", func(r *rand.Rand, lines []string) []string {
		// A log viewer's copy (kubectl --timestamps, Loki, CloudWatch) of
		// one record holding the whole paste: its stamp on the first line.
		st := []string{"2025-02-11T08:14:52.317402911Z ", "[2025-02-11 08:14:52] ", "2025-02-11 08:14:52,317 "}[r.IntN(3)]
		out := slices.Clone(lines)
		if len(out) > 0 {
			out[0] = st + out[0]
		}
		return out
	}},
	{"quote-links", func(r *rand.Rand, lines []string) []string {
		// A GitHub comment quoting a log: "> " on every line, URLs turned
		// into markdown links ([text](url)) or autolinks (<url>).
		out := make([]string, len(lines))
		for i, l := range lines {
			l = reURL.ReplaceAllStringFunc(l, func(u string) string {
				if r.IntN(2) == 0 {
					return "<" + u + ">"
				}
				return "[" + u + "](" + u + ")"
			})
			out[i] = "> " + l
		}
		return out
	}},
	{"ray", func(r *rand.Rand, lines []string) []string {
		// Ray's driver relays every worker line with the actor and its
		// pid (and ip on another node), and folds repeats across workers
		// with a " [repeated Nx across cluster]" suffix.
		pre := []string{"(RayWorkerWrapper pid=48213, ip=10.31.4.17) ", "(pid=48213) ", "(TrainTrainable pid=9127) "}[r.IntN(3)]
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = pre + l
			if len(l) > 20 && r.IntN(4) == 0 {
				out[i] += fmt.Sprintf(" [repeated %dx across cluster]", 2+r.IntN(14))
			}
		}
		return out
	}},
	{"mpi-midline", func(r *rand.Rand, lines []string) []string {
		// Open MPI's --tag-output: each line tagged with its job and rank
		// and stream; another rank's output that ended without a newline
		// runs into the next line, so tags appear mid-line.
		out := make([]string, len(lines))
		for i, l := range lines {
			rank := "0"
			if m := reRankP.FindStringSubmatch(l); m != nil {
				rank, l = m[1], l[len(m[0]):]
			}
			out[i] = "[1," + rank + "]<stderr>:" + l
			if r.IntN(4) == 0 {
				out[i] = fmt.Sprintf("[1,%d]<stdout>:step %d loss 3.%02d ", 8+r.IntN(4), r.IntN(900), r.IntN(99)) + out[i]
			}
		}
		return out
	}},
	{"cr-progress", func(r *rand.Rand, lines []string) []string {
		// A progress bar redrawn with carriage returns and no newline
		// until the next line overwrites it (tqdm to a file or a pipe).
		out := slices.Clone(lines)
		for k := 0; k < 3 && len(out) > 0; k++ {
			i := r.IntN(len(out))
			a := 10 + r.IntN(80)
			out[i] = fmt.Sprintf(" %d%%|###       | %d/412 [00:%02d<03:10,  1.92it/s]\r %d%%|###       | %d/412 [00:%02d<03:09,  1.93it/s]\r", a, a*4, a%60, a+1, a*4+2, (a+1)%60) + out[i]
		}
		return out
	}},
	{"compose", func(r *rand.Rand, lines []string) []string {
		// docker compose's service column ("trainer-1  | ") and batch
		// runners' node and stream tag ("gpu-node07 [stderr] ").
		pre := []string{"trainer-1  | ", "ddp_worker_2  | ", "gpu-node07 [stderr] "}[r.IntN(3)]
		return mapLines(lines, func(l string) string { return pre + l })
	}},
	{"trailing-shell", func(r *rand.Rand, lines []string) []string {
		// A paste that goes on past the failure: the shell prompt the user
		// typed next and what it printed, directly after the last line.
		tails := [][]string{
			{"$ nvidia-smi --query-gpu=index,memory.used --format=csv,noheader", "0, 81037 MiB", "1, 3 MiB"},
			{"(train) alice@gpu-b07:~/proj$ tail -n 2 /var/log/syslog", "Mar  3 04:12:09 gpu-b07 systemd[1]: session-51.scope: Consumed 2h 11min CPU time."},
			{"[bob@login2 run7]$ cat /sys/fs/cgroup/memory.events; echo done", "oom 0", "done"},
			{"root@7f3c2a9e41d0:/workspace# free -g | head -2", "              total        used        free", "Mem:            503         498           1"},
		}
		return append(slices.Clone(lines), tails[r.IntN(len(tails))]...)
	}},
}

// mapLines changes every line the same way.
func mapLines(lines []string, f func(string) string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = f(l)
	}
	return out
}

// weaker ids are what a perturbed log may fall back to: a generic
// wrapper, the return-code trail, a placed or unplaced warning.
var weakerIDs = map[string]bool{
	"nccl-unhandled-system-error": true, "nccl-unhandled-cuda-error": true, "nccl-internal-error": true,
	"nccl-invalid-usage": true, "nccl-invalid-argument": true, "nccl-remote-error": true, idReturnTrail: true,
	idUnrecognisedWarn: true, idCatalogWarning: true, idUnplaced: true,
}

// weakerOf declares, per root, the less specific diagnosis of the same
// guide a perturbation may leave (an elided size or errno, an elided
// opCount line): the user is sent to the same place.
var weakerOf = map[string][]string{
	"shm-create-nospace":     {"shm-create-failed"},
	"shm-attach-enoent":      {"shm-unlink-enoent"},
	"watchdog-timeout":       {"watchdog-seq-status"},
	idCollectiveHang:         {idInitHang},
	"dataloader-worker-died": {idPythonException},
}

// metamorphicRounds is how many seeds each (log, perturbation) gets: CI's
// share of time (2 cores) allows two.
const metamorphicRounds = 2

// lostBudget is how many runs of a perturbation may still lose their root
// (every run of the others keeps it or a declared weaker one): the cases
// left after the second blind set's classes were fixed, each logged by the
// test — lines joined across an exception or a kill line, a field elided
// inside a signature's number, a traceback wrapped at a colon. The budget
// only goes down.
var lostBudget = map[string]int{"elide": 5, "join": 12, "rewrap-punct": 2}

func TestMetamorphic(t *testing.T) {
	e := testExplainer(t)
	dir := filepath.Join("testdata", "corpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type cell struct{ runs, kept, weaker, lost int }
	matrix := map[string]*cell{}
	var failures []string
	for _, ent := range ents {
		name := ent.Name()
		if ent.IsDir() || strings.HasSuffix(name, ".bin") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // NUL holes: the reader's own test covers them
		}
		orig := analyze(t, e, string(data))
		root := rootOf(orig)
		origIDs := diagIDs(orig)
		evLines := map[int64]bool{}
		for _, d := range orig.Diagnoses {
			for _, ev := range d.Evidence {
				evLines[ev.Line] = true
			}
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		for pi, p := range perturbations {
			fn := p.fn
			if p.name == "cut-ends" {
				fn = func(r *rand.Rand, ls []string) []string {
					// A paste that starts and ends a line later/earlier:
					// cut the ends unless they carry the root's evidence.
					lo, hi := 0, len(ls)
					for k := 0; k < 2 && lo < hi-1 && !evLines[int64(lo+1)]; k++ {
						lo++
					}
					for k := 0; k < 2 && hi > lo+1 && !evLines[int64(hi)]; k++ {
						hi--
					}
					return ls[lo:hi]
				}
			}
			c := matrix[p.name]
			if c == nil {
				c = &cell{}
				matrix[p.name] = c
			}
			for round := 0; round < metamorphicRounds; round++ {
				seed := uint64(pi*1000 + round)
				r := rand.New(rand.NewPCG(seed, uint64(len(name))))
				in := strings.Join(fn(r, slices.Clone(lines)), "\n") + "\n"
				got := analyze(t, e, in)
				c.runs++
				gr := rootOf(got)
				switch {
				case len(orig.Diagnoses) > 0 && len(got.Diagnoses) == 0:
					c.lost++
					// Never within a budget: a failure read as no failure.
					t.Errorf("%s %s seed %d: all-clear (was %v)", name, p.name, seed, origIDs)
				case root == nil || gr != nil && gr.ID == root.ID:
					c.kept++
				case gr != nil && slices.Contains(weakerOf[root.ID], gr.ID),
					gr != nil && (weakerIDs[gr.ID] || slices.Contains(origIDs, gr.ID)) && !(root.NotNCCL && !gr.NotNCCL && !weakerIDs[gr.ID]):
					c.weaker++
				default:
					c.lost++
					failures = append(failures, fmt.Sprintf("%s %s seed %d: root %s, was %s", name, p.name, seed, idOf(gr), root.ID))
				}
			}
		}
	}
	var names []string
	for n := range matrix {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := matrix[n]
		t.Logf("%-14s runs %4d  root kept %4d  weaker %3d  lost %3d", n, c.runs, c.kept, c.weaker, c.lost)
		if c.lost > lostBudget[n] {
			t.Errorf("%s: %d runs lost their root, the budget is %d", n, c.lost, lostBudget[n])
		}
	}
	for _, f := range failures {
		t.Log("lost: " + f)
	}
}

func idOf(d *Diagnosis) string {
	if d == nil {
		return "none"
	}
	return d.ID
}
