// Package validate proves NCCL end to end on this machine by launching a
// small collective test: a ladder of runs (one GPU; all GPUs with defaults;
// shared memory only; network only; the candidate fix environment), each
// judged for correct values first, then for the transports NCCL actually
// used (parsed from NCCL_DEBUG=INFO) and the bus bandwidth of large
// messages against a sourced range for the detected interconnect.
//
// Two backends run the collectives: torchrun with an embedded
// torch.distributed script (collective.py), and nccl-tests' all_reduce_perf.
// Launchers are found by name on the PATH of the diagnosed environment and
// run with an explicit environment, contained by internal/contain (a PID
// namespace, else a child subreaper; a cgroup where writable) so that
// nothing they start outlives ncclwiz. A timeout or cancellation sends
// SIGTERM to the launcher's group; at every end, whatever of the run is
// still alive is reported (PID, command) and killed.
package validate

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Backend names.
const (
	BackendAuto      = "auto"
	BackendTorchrun  = "torchrun"
	BackendNCCLTests = "nccl-tests"
)

// Rung IDs, in ladder order.
const (
	RungSingle = "single"
	RungAll    = "all"
	RungSHM    = "shm"
	RungNet    = "net"
	RungFix    = "fix"
)

// Status of a rung.
type Status string

// Statuses.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Skipped Status = "skipped"
)

// Defaults.
const (
	DefaultTimeout   = 3 * time.Minute
	DefaultMaxBytes  = 256 << 20
	DefaultTolerance = 0.5
	// typicalFactor is nccl-tests' own pass factor for NCCL_TESTS_MIN_BW
	// (src/common.cu: fail below 0.9 x the minimum); between Tolerance and
	// this factor a rung passes with a note.
	typicalFactor = 0.9
	// largeMin is the smallest message judged for bandwidth; below it
	// latency dominates (reference §6.1, DCGM PR #111, sichek #52).
	largeMin = 64 << 20
)

// Options configure Run. The zero value runs the default ladder with the
// automatic backend.
type Options struct {
	// Backend is auto (torchrun if the interpreter has torch with CUDA,
	// else nccl-tests), torchrun or nccl-tests.
	Backend string
	// Python is the interpreter of the user's training; empty picks the
	// active venv ($VIRTUAL_ENV), conda env ($CONDA_PREFIX), then python3 or
	// python on PATH.
	Python string
	// NCCLTestsDir holds all_reduce_perf (DIR or DIR/build); empty searches PATH.
	NCCLTestsDir string
	// Rungs selects rungs by ID; nil runs the whole ladder. Asking for
	// "fix" adds "all", its baseline.
	Rungs []string
	// Env is the candidate fix environment (KEY=VALUE). When empty, the
	// NCCL_* variables of the user's environment are the candidate.
	Env []string
	// Timeout bounds each rung (DefaultTimeout when zero).
	Timeout time.Duration
	// Grace is how long a timed-out rung gets between SIGTERM and SIGKILL.
	Grace time.Duration
	// Tolerance is the fraction of the low end of the expected bandwidth
	// range a rung must reach (DefaultTolerance when zero).
	Tolerance float64
	// MaxBytes is the largest message size (DefaultMaxBytes when zero).
	MaxBytes int64
	// GPUs replaces gpu.Probe (tests, or a caller that already probed).
	GPUs *Snapshot
	// NGPUs overrides the number of GPUs to use (0: all visible).
	NGPUs int
	// LogDir keeps each rung's full output as <rung>.log (empty: a private
	// temporary directory removed afterwards).
	LogDir string
	// Contain forces how the test's processes are contained:
	// "pid-namespace" or "subreaper"; empty picks the strongest available.
	Contain string
	// OnEvent receives live progress. It is called from the goroutine
	// reading the launcher's output and must not block for long.
	OnEvent func(Event)
}

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	EventPlan      EventKind = "plan"       // Text: what will run
	EventRungStart EventKind = "rung-start" // Rung, Text: the rung's title, Command: the argv, Env: what the rung sets
	EventTransport EventKind = "transport"  // first line of a transport class
	EventMeasure   EventKind = "measure"    // Size: one message size finished
	EventLog       EventKind = "log"        // a warning or error line of the run
	EventRungDone  EventKind = "rung-done"  // Result: the judged rung
	EventNote      EventKind = "note"       // Text: something worth knowing
)

// Event is one piece of live progress.
type Event struct {
	Kind    EventKind
	Rung    string
	Text    string
	Command []string
	Env     []string
	Size    *SizeResult
	Result  *RungResult
}

// String renders the event as one plain line (unsanitised: callers that
// print it pass it through textsafe).
func (e Event) String() string {
	switch e.Kind {
	case EventRungStart:
		return fmt.Sprintf("[%s] %s", e.Rung, e.Text)
	case EventMeasure:
		if e.Size == nil {
			return fmt.Sprintf("[%s] measured", e.Rung)
		}
		s := e.Size
		mark := "ok"
		if s.Wrong > 0 || !s.OK {
			mark = fmt.Sprintf("%d WRONG", s.Wrong)
		}
		return fmt.Sprintf("[%s] %-10s %9s  busbw %s  %s", e.Rung, s.Op, FormatBytes(s.Bytes), formatBW(s.BusBW, s.HasBW), mark)
	case EventRungDone:
		if e.Result == nil {
			return fmt.Sprintf("[%s] done", e.Rung)
		}
		return fmt.Sprintf("[%s] %s: %s", e.Rung, e.Result.Status, e.Result.Summary())
	case EventPlan, EventNote:
		return e.Text
	default:
		return fmt.Sprintf("[%s] %s", e.Rung, e.Text)
	}
}

// Rung is one step of the ladder.
type Rung struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Ranks int    `json:"ranks"`
	// Env is what this rung sets on top of the base environment.
	Env []string `json:"env,omitempty"`
}

// SizeResult is one collective at one message size, over all ranks.
type SizeResult struct {
	Op    string `json:"op"` // all_reduce, all_gather
	Bytes int64  `json:"bytes"`
	// Wrong is the number of wrong elements (summed over ranks, or
	// out-of-place plus in-place for nccl-tests).
	Wrong int64 `json:"wrong"`
	// OK is false when any rank reported a wrong value, or when
	// correctness could not be established (nccl-tests "N/A").
	OK bool `json:"ok"`
	// Checked is false when no correctness figure exists.
	Checked bool `json:"checked"`
	// Ranks is how many ranks reported this size (torchrun backend).
	Ranks int `json:"ranks,omitempty"`
	// BusBW is the bus bandwidth in GB/s (the slowest rank's; the better
	// of out-of-place and in-place for nccl-tests).
	BusBW  float64 `json:"busbw_gbps"`
	AlgBW  float64 `json:"algbw_gbps"`
	TimeUS float64 `json:"time_us"`
	HasBW  bool    `json:"has_busbw"`
}

// Transport is one transport class NCCL reported connecting with.
type Transport struct {
	// Class is P2P, SHM, NET/Socket, NET/IB, NET (other plugin) or COLLNET.
	Class string `json:"class"`
	// Via is the most frequent full "via …" text (e.g. P2P/IPC/read).
	Via string `json:"via"`
	// Connections counts channel lines.
	Connections int `json:"connections"`
}

// Proc is a process found after a rung ended.
type Proc struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Command is its command line (shortened; redacted at output).
	Command string `json:"command,omitempty"`
	// Why it belongs to the run: "process group", "environment marker" or
	// "descendant" (it left the group and dropped the marker, and was
	// found through the run's PID namespace, subreaper or cgroup).
	Why string `json:"why"`
}

// ShmEntry is a /dev/shm entry that appeared during a rung and was still
// there afterwards.
type ShmEntry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Diagnosis names the explained cause of a failed rung.
type Diagnosis struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Guide string `json:"guide"`
	Line  string `json:"line,omitempty"`
}

// Bandwidth states.
const (
	BWOK        = "ok"         // at or above the typical range's low end x typicalFactor
	BWBelow     = "below"      // above Tolerance x low end but below typical: passes with a note
	BWLow       = "low"        // below Tolerance x low end: fails
	BWMissing   = "missing"    // no large-message measurement: fails
	BWNotJudged = "not-judged" // no sourced range applies (Detail says why)
	BWNA        = "n/a"        // one rank: bus bandwidth is zero by definition
)

// BandwidthVerdict is the judgement of the large-message bus bandwidth.
type BandwidthVerdict struct {
	State  string `json:"state"`
	Detail string `json:"detail"`
	// Threshold is the busbw the rung had to reach (GB/s), when judged.
	Threshold float64 `json:"threshold_gbps,omitempty"`
}

// RungResult is one rung, run and judged.
type RungResult struct {
	Rung   Rung   `json:"rung"`
	Status Status `json:"status"`
	// Reasons say why the rung failed or was skipped, most important first.
	Reasons []string `json:"reasons,omitempty"`
	// Notes are facts worth knowing that do not fail the rung.
	Notes []string `json:"notes,omitempty"`
	// Command is the launcher's argv; SetEnv the variables ncclwiz set.
	Command []string `json:"command,omitempty"`
	SetEnv  []string `json:"set_env,omitempty"`

	Transports  []Transport  `json:"transports"`
	Sizes       []SizeResult `json:"sizes"`
	WrongValues int64        `json:"wrong_values"`
	// LargeBytes and LargeBusBW are the largest all_reduce measured.
	LargeBytes  int64            `json:"large_bytes,omitempty"`
	LargeBusBW  float64          `json:"large_busbw_gbps,omitempty"`
	HasLarge    bool             `json:"has_large"`
	Expected    *Expectation     `json:"expected,omitempty"`
	Bandwidth   BandwidthVerdict `json:"bandwidth"`
	AvgBusBW    float64          `json:"nccltests_avg_busbw_gbps,omitempty"`
	NCCLVersion string           `json:"nccl_version,omitempty"`

	ExitCode  int           `json:"exit_code"`
	Signal    string        `json:"signal,omitempty"`
	TimedOut  bool          `json:"timed_out"`
	Canceled  bool          `json:"canceled"`
	Duration  time.Duration `json:"duration_ns"`
	Errors    []string      `json:"errors,omitempty"`
	Diagnosis *Diagnosis    `json:"diagnosis,omitempty"`
	// Survivors are processes of the run found alive after the launcher
	// ended; ncclwiz ended them.
	Survivors   []Proc     `json:"survivors,omitempty"`
	LeftoverShm []ShmEntry `json:"leftover_shm,omitempty"`
	LogTail     []string   `json:"log_tail,omitempty"`
	// Containment says how the rung's processes were kept together
	// (PID namespace, subreaper, cgroup).
	Containment string `json:"containment,omitempty"`
	LogFile     string `json:"log_file,omitempty"`
}

// Summary is a one-line description of the rung's outcome.
func (r *RungResult) Summary() string {
	switch r.Status {
	case Skipped, Fail:
		if len(r.Reasons) > 0 {
			return r.Reasons[0]
		}
		return string(r.Status)
	}
	if r.Rung.Ranks < 2 {
		n := 0
		for _, s := range r.Sizes {
			if s.Op == "all_reduce" || s.Op == "" {
				n++
			}
		}
		return fmt.Sprintf("all values correct at %d sizes on 1 GPU", n)
	}
	return fmt.Sprintf("correct; %s; busbw %s at %s", transportList(r.Transports), formatBW(r.LargeBusBW, r.HasLarge), FormatBytes(r.LargeBytes))
}

// ABRow is one line of the A/B table.
type ABRow struct {
	Metric  string `json:"metric"`
	Without string `json:"without"`
	With    string `json:"with"`
}

// ABComparison sets the same rung with and without the candidate env side
// by side.
type ABComparison struct {
	Base      string   `json:"base"`
	Candidate string   `json:"candidate"`
	Env       []string `json:"env"`
	Rows      []ABRow  `json:"rows"`
	// Verdict is one sentence: does the candidate help, hurt, cost bandwidth.
	Verdict string `json:"verdict"`
}

// ResultSchema is the version of Result's JSON form.
const ResultSchema = 1

// Result is a whole validation run.
type Result struct {
	Schema  int    `json:"schema"`
	Backend string `json:"backend"`
	// Launcher describes the command prefix (e.g. "/venv/bin/torchrun").
	Launcher string `json:"launcher"`
	Python   string `json:"python,omitempty"`
	Torch    string `json:"torch,omitempty"`
	NCCL     string `json:"nccl,omitempty"`
	GPUs     int    `json:"gpus"`
	// System describes the GPUs and interconnect used.
	System  string        `json:"system"`
	Rungs   []RungResult  `json:"rungs"`
	AB      *ABComparison `json:"ab,omitempty"`
	Pass    bool          `json:"pass"`
	Verdict string        `json:"verdict"`
	Notes   []string      `json:"notes,omitempty"`
	// Interrupted is set when the run was cancelled before the end.
	Interrupted bool   `json:"interrupted"`
	RunID       string `json:"run_id"`
	// Containment is how the runs' processes were kept together, so that
	// none could outlive ncclwiz.
	Containment string `json:"containment,omitempty"`
}

// CannotRunError says why no collective test can run here and what to
// install or do. Run and Prepare return it (wrapped) before starting anything.
// Reasons and Hints are sentences of their own (capital, full stop), so the
// CLI can list them and the wizard can set them as prose (Text).
type CannotRunError struct {
	Reasons []string
	Hints   []string
}

// newCannotRun makes each reason and hint a sentence.
func newCannotRun(reasons, hints []string) *CannotRunError {
	return &CannotRunError{Reasons: sentences(reasons), Hints: sentences(hints)}
}

func (e *CannotRunError) Error() string {
	if len(e.Reasons) == 0 {
		return "a collective test cannot run here"
	}
	// One line after "ncclwiz: ": the first reason, as a clause.
	r := strings.TrimSuffix(e.Reasons[0], ".")
	if c, n := utf8.DecodeRuneInString(r); n < len(r) {
		if next, _ := utf8.DecodeRuneInString(r[n:]); !unicode.IsUpper(next) { // not "NVML", "CUDA_…"
			r = string(unicode.ToLower(c)) + r[n:]
		}
	}
	return "a collective test cannot run here: " + r
}

// Text is the reasons as a paragraph, then the hints as another.
func (e *CannotRunError) Text() string {
	t := strings.Join(e.Reasons, " ")
	if len(e.Hints) > 0 {
		t = strings.TrimPrefix(t+"\n\n"+strings.Join(e.Hints, " "), "\n\n")
	}
	return t
}

// sentences makes each part a sentence: a capital first letter and a full
// stop. Names that must stay lower case (torchrun, nccl-tests) are never
// put first: "the torchrun backend …".
func sentences(parts []string) []string {
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		r, n := utf8.DecodeRuneInString(p)
		p = string(unicode.ToUpper(r)) + p[n:]
		if !strings.HasSuffix(p, ".") {
			p += "."
		}
		out = append(out, p)
	}
	return out
}
