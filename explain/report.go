package explain

import "fmt"

// SchemaVersion is the version of the JSON report; it changes only when a
// field changes meaning or disappears.
const SchemaVersion = 1

// Report is the explainer's answer for a set of logs. Every string in it
// that came from a log has been sanitised (terminal escapes made visible)
// and had secrets redacted.
type Report struct {
	Schema int `json:"schema"`
	// Diagnoses are the failures, root cause first. The root may be a
	// cause outside NCCL (Diagnosis.NotNCCL); the NCCL lines then follow
	// from it. Empty when nothing failed.
	Diagnoses []Diagnosis `json:"diagnoses"`
	// NCCLVersion is the version the logs name ("2.21.5+cuda12.4"), or "".
	NCCLVersion string `json:"nccl_version"`
	// Summary says in one or two sentences what happened.
	Summary string `json:"summary"`

	// Notes are lines worth knowing that are not failures (deprecated
	// variable names, barrier device guesses, cuMem fallbacks).
	Notes []Note `json:"notes,omitempty"`
	// FirstError is the first non-NCCL error (a Python exception, a CUDA
	// out-of-memory in the model, a killed process), when there is one.
	FirstError *ErrorLine `json:"first_error,omitempty"`
	// EarliestFailure is the failure line with the earliest timestamp,
	// when the logs have timestamps: its rank is the first suspect.
	EarliestFailure *Evidence `json:"earliest_failure,omitempty"`
	// FirstSignature is the failure signature that fired first in input
	// order (files in the order given).
	FirstSignature *SignatureFirst `json:"first_signature,omitempty"`
	// TorchrunRootCause is torchrun's "Root Cause (first observed
	// failure)" block, when present.
	TorchrunRootCause *TorchrunFailure `json:"torchrun_root_cause,omitempty"`
	// LauncherFailures is every entry of torchrun's failure summaries.
	LauncherFailures []TorchrunFailure `json:"launcher_failures,omitempty"`
	// Digest is what NCCL_DEBUG=INFO lines say about the job, failure or not.
	Digest *Digest `json:"digest,omitempty"`
	// Inputs describes each file read.
	Inputs []InputInfo `json:"inputs"`
	// Warnings are problems reading the input (truncated lines, binary
	// data, a corrupt .gz).
	Warnings []string `json:"warnings,omitempty"`
}

// Diagnosis is one failure signature (or inference) found in the logs.
type Diagnosis struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	Confidence string `json:"confidence"` // high, medium, low
	// RootCause is true for the one diagnosis ncclwiz names as the cause.
	RootCause bool `json:"root_cause"`
	// Role: cause, wrapper, consequence, context (or warning).
	Role string `json:"role"`
	// NotNCCL marks a cause outside NCCL (a Python exception, a host OOM
	// kill, a device-side assert…) named as the root: NCCL's lines are then
	// its knock-on.
	NotNCCL bool `json:"not_nccl,omitempty"`
	// Inferred is true when no line states this: it is deduced from
	// several (confidence is then low).
	Inferred bool `json:"inferred,omitempty"`
	// ConsequenceOf names the root cause this line follows from.
	ConsequenceOf string            `json:"consequence_of,omitempty"`
	Evidence      []Evidence        `json:"evidence"`
	Fields        map[string]string `json:"fields"`
	// Count is how many lines matched.
	Count int   `json:"count"`
	Ranks []int `json:"ranks,omitempty"`
	// Culprit is the one rank this diagnosis blames, from the evidence:
	// the rank that raised or died, the straggler the others waited for,
	// the rank that never published the NCCL unique id. Ranks lists every
	// rank that printed the diagnosis's lines.
	Culprit *int     `json:"culprit_rank,omitempty"`
	Hosts   []string `json:"hosts,omitempty"`
	// AlsoMatched lists other signatures of the same guide folded into
	// this diagnosis.
	AlsoMatched []string  `json:"also_matched,omitempty"`
	Explanation string    `json:"explanation,omitempty"`
	Guide       string    `json:"guide"`
	Checks      []string  `json:"checks"`
	Fixes       []string  `json:"fixes"`
	Advice      []string  `json:"advice,omitempty"`
	Watchdog    *Watchdog `json:"watchdog,omitempty"`
	// Stop says where a log that just stops (init-hang, collective-hang)
	// stopped.
	Stop *LogStop `json:"stop,omitempty"`
	// Suspects are the causes the log supports for a hang, each with the
	// command that proves or clears it.
	Suspects []Suspect `json:"suspects,omitempty"`
	// Disagreements are facts that hosts or ranks printed differently
	// (hosts-disagree, nccl-version-mismatch, collective-desync).
	Disagreements []Disagreement `json:"disagreements,omitempty"`
}

// LogStop is where a log without an error stopped.
type LogStop struct {
	// Stage: "framework" (only a framework's own "starting the process
	// group" lines, nothing of NCCL), "bootstrap" (only
	// version/bootstrap/network lines),
	// "topology" (communicator created, no transport lines), "connecting"
	// (transport lines, no Init COMPLETE), "after-init" (every rank
	// printed Init COMPLETE, nothing after), "collective" (the first
	// collective was issued: NCCL_DEBUG_SUBSYS=COLL opCount lines).
	Stage string `json:"stage"`
	// Interrupted is true when the log ends with the user or the
	// launcher stopping the job (Ctrl-C, SIGTERM, a Slurm time limit).
	Interrupted bool `json:"interrupted,omitempty"`
	// CompleteRanks printed Init COMPLETE; PendingRanks started init and
	// did not; MissingRanks are below nranks and never printed an init
	// line.
	CompleteRanks []int `json:"complete_ranks,omitempty"`
	PendingRanks  []int `json:"pending_ranks,omitempty"`
	MissingRanks  []int `json:"missing_ranks,omitempty"`
	// LastLines are the last NCCL lines of each input.
	LastLines []Evidence `json:"last_lines,omitempty"`
}

// Suspect is one cause a hang log supports.
type Suspect struct {
	ID string `json:"id"`
	// Why is what the log shows.
	Why string `json:"why"`
	// Command proves or clears the suspect.
	Command string `json:"command"`
	Guide   string `json:"guide,omitempty"`
}

// Disagreement is one fact seen with different values.
type Disagreement struct {
	// Fact: nccl-version, nccl-cuda-build, cuda-driver, network,
	// interface-subnet, nranks, env:NAME, transport, collective.
	Fact   string      `json:"fact"`
	Values []FactValue `json:"values"`
}

// FactValue is one value of a fact and where it was printed.
type FactValue struct {
	Value string   `json:"value"`
	Where []string `json:"where"`
	// Evidence is one line that printed it.
	Evidence *Evidence `json:"evidence,omitempty"`
}

// Evidence is one log line.
type Evidence struct {
	File string `json:"file"`
	Line int64  `json:"line"`
	Text string `json:"text"`
	// Rank is the global rank the line belongs to (-1 unknown).
	Rank int `json:"rank"`
	// LocalRank is set when a launcher prefix named it ([default3]:).
	LocalRank *int   `json:"local_rank,omitempty"`
	Host      string `json:"host,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Time      string `json:"time,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// ViaLastError marks a payload of PyTorch's "Last error:" line.
	ViaLastError bool `json:"via_last_error,omitempty"`
	// Signature is set where the evidence stands for a signature
	// (earliest_failure).
	Signature string `json:"signature,omitempty"`
}

// Note is a non-failure finding.
type Note struct {
	ID       string     `json:"id"`
	Title    string     `json:"title"`
	Text     string     `json:"text"`
	Guide    string     `json:"guide,omitempty"`
	Count    int        `json:"count"`
	Evidence []Evidence `json:"evidence"`
}

// ErrorLine is a non-NCCL error.
type ErrorLine struct {
	Kind string `json:"kind"` // python-exception, cuda-oom, cuda-assert, killed, segfault, signal (another signal)
	Evidence
	// Frame is the last traceback frame before the exception, if seen.
	Frame string `json:"frame,omitempty"`
}

// SignatureFirst names the signature that fired first.
type SignatureFirst struct {
	ID   string `json:"id"`
	File string `json:"file"`
	Line int64  `json:"line"`
}

// TorchrunFailure is one entry of torchrun's failure summary ("Root Cause
// (first observed failure)" or "Failures:").
type TorchrunFailure struct {
	File      string `json:"file"`
	Line      int64  `json:"line"`
	Host      string `json:"host,omitempty"`
	Rank      int    `json:"rank"`
	LocalRank int    `json:"local_rank"`
	ExitCode  string `json:"exitcode,omitempty"`
	Signal    string `json:"signal,omitempty"`
	Traceback string `json:"traceback,omitempty"`
	// ErrorFile is the @record error file the worker wrote.
	ErrorFile string `json:"error_file,omitempty"`
	PID       int    `json:"pid,omitempty"`
	// RootCause marks the entry torchrun listed as the first observed
	// failure.
	RootCause bool `json:"root_cause,omitempty"`
}

// InputInfo describes one input.
type InputInfo struct {
	Name           string `json:"name"`
	Gzip           bool   `json:"gzip,omitempty"`
	Bytes          int64  `json:"bytes"`
	Lines          int64  `json:"lines"`
	TruncatedLines int64  `json:"truncated_lines,omitempty"`
	NULBytes       int64  `json:"nul_bytes,omitempty"`
	BadUTF8Lines   int64  `json:"invalid_utf8_lines,omitempty"`
	Binary         bool   `json:"binary,omitempty"`
	Empty          bool   `json:"empty,omitempty"`
	Error          string `json:"error,omitempty"`
}

// Watchdog decodes a PyTorch watchdog timeout.
type Watchdog struct {
	SeqNum    int64  `json:"seq_num"` // -1 when the log did not say
	OpType    string `json:"op_type"`
	NumelIn   int64  `json:"numel_in"` // -1 when the log did not say
	NumelOut  int64  `json:"numel_out"`
	TimeoutMS int64  `json:"timeout_ms"`
	RanForMS  int64  `json:"ran_for_ms"`
	// Bytes is the larger of the input and output tensors for common
	// element sizes ("float32", "bfloat16/float16", "int8/float8").
	Bytes map[string]int64 `json:"bytes,omitempty"`
	// NeededBytesPerSec is the bandwidth that would have moved Bytes
	// (twice, as an all-reduce does) within the timeout.
	NeededBytesPerSec map[string]float64 `json:"needed_bytes_per_sec,omitempty"`
	// Verdict: "hang" (a rank never arrived or the link stalled) or
	// "too-slow" (the data could not move in time), "unknown".
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons"`
	// TimedOutRanks reported this timeout; SilentRanks appear in the logs
	// (or in NCCL's rank count) but did not.
	TimedOutRanks []int `json:"timed_out_ranks,omitempty"`
	SilentRanks   []int `json:"silent_ranks,omitempty"`
	// Stragglers are the ranks that fell behind (lowest last enqueued
	// work, a rank that crashed first, or a silent rank).
	Stragglers []int `json:"stragglers,omitempty"`
	// SeqByRank is the last enqueued / completed work per rank from the
	// watchdog's status lines.
	SeqByRank map[string]SeqStatus `json:"seq_by_rank,omitempty"`
	Advice    []string             `json:"advice"`
}

// SeqStatus is one rank's view of the work queue at the timeout.
type SeqStatus struct {
	TimeoutSeq    int64 `json:"timeout_seq"` // -1 when not printed
	LastEnqueued  int64 `json:"last_enqueued"`
	LastCompleted int64 `json:"last_completed"`
}

// Digest summarises NCCL_DEBUG=INFO output.
type Digest struct {
	Versions      []VersionSeen     `json:"versions,omitempty"`
	CUDADriver    string            `json:"cuda_driver,omitempty"`
	NRanks        int               `json:"nranks,omitempty"`
	NNodes        int               `json:"nnodes,omitempty"`
	LocalRanks    int               `json:"local_ranks,omitempty"`
	Comms         int               `json:"communicators,omitempty"`
	Network       string            `json:"network,omitempty"`
	Bootstrap     []string          `json:"bootstrap_interfaces,omitempty"`
	SocketIfs     []string          `json:"socket_interfaces,omitempty"`
	IBDevices     []string          `json:"ib_devices,omitempty"`
	RiskyIfs      []string          `json:"risky_interfaces,omitempty"`
	Transports    map[string]int    `json:"transports,omitempty"`
	Peers         []PeerLink        `json:"peers,omitempty"`
	PeersCapped   bool              `json:"peers_capped,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	CuMemFallback []string          `json:"cumem_host_fallback,omitempty"`
	ErrorOrigin   string            `json:"error_origin,omitempty"`
	Readings      []string          `json:"readings,omitempty"`
}

// VersionSeen is one NCCL version and where it was seen.
type VersionSeen struct {
	Version string   `json:"version"`
	Where   []string `json:"where,omitempty"`
}

// PeerLink is the transport between two ranks.
type PeerLink struct {
	From int      `json:"from"`
	To   int      `json:"to"`
	Via  []string `json:"via"`
}

// Words names an error line in words: its kind and where it happened.
func (e *ErrorLine) Words() string {
	kind := map[string]string{"python-exception": "a Python exception", "cuda-oom": "CUDA running out of memory in the model",
		"killed": "a process killed by SIGKILL", "segfault": "a segmentation fault", "cuda-assert": "a device-side assert in a CUDA kernel"}[e.Kind]
	if kind == "" {
		kind = e.Kind
	}
	if w := e.Where(); w != "" {
		kind += " on " + w
	}
	return kind
}

// Where names the rank and host of a line ("rank 3 (node2)"), or "".
func (ev Evidence) Where() string {
	switch {
	case ev.Rank >= 0 && ev.Host != "":
		return fmt.Sprintf("rank %d (%s)", ev.Rank, ev.Host)
	case ev.Rank >= 0:
		return fmt.Sprintf("rank %d", ev.Rank)
	case ev.Host != "":
		return ev.Host
	}
	return ""
}
