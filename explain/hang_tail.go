package explain

import (
	"bytes"
	"regexp"
)

// A log that just stops is judged by how it ends: the pipeline only shows
// the consumer the lines that may match something, so each input keeps its
// last lines (bounded) for the end-of-input judgement.
const (
	tailLines    = 64
	tailLineSize = 512
)

// tailKeeper holds the last tailLines lines of an input.
type tailKeeper struct {
	lines [][]byte
}

// add takes the lines of one chunk (whole lines; the last may lack its
// newline). Only the chunk's last tailLines lines are copied.
func (t *tailKeeper) add(data []byte) {
	if len(data) == 0 {
		return
	}
	end := len(data)
	if data[end-1] == '\n' {
		end--
	}
	var got [][]byte
	for n := 0; n < tailLines && end >= 0; n++ {
		start := bytes.LastIndexByte(data[:end], '\n') + 1
		line := data[start:end]
		if len(line) > tailLineSize {
			line = trimPartialRune(line[:tailLineSize])
		}
		got = append(got, append([]byte(nil), line...))
		if start == 0 {
			break
		}
		end = start - 1
	}
	// got is newest first; keep oldest first.
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	if len(got) >= tailLines {
		t.lines = got
		return
	}
	t.lines = append(t.lines, got...)
	if over := len(t.lines) - tailLines; over > 0 {
		t.lines = append(t.lines[:0], t.lines[over:]...)
	}
}

// Endings of an input.
const (
	endNone     = ""         // nothing to judge (empty)
	endNCCL     = "nccl"     // the last meaningful lines are NCCL INFO lines
	endProgress = "progress" // the program printed something of its own last
	endError    = "error"    // an error or NCCL WARN line ends it
)

// inputEnd is how one input ends.
type inputEnd struct {
	file        string
	kind        string
	interrupted bool
	interrupt   *Evidence
	lastNCCL    *Evidence
	// frame is the collective a Ctrl-C traceback was inside
	// ("dist.all_reduce(t)"), when it shows one.
	frame string
}

var (
	// The user or the launcher stopped the job: Ctrl-C, torchrun's signal
	// handling, Slurm's cancel and time limit, mpirun's abort.
	reInterrupt = regexp.MustCompile(`^\^C|KeyboardInterrupt|Received (?:SIGINT|SIGTERM|Signals\.SIG(?:INT|TERM)|[0-9]+) death signal|closing signal SIG(?:INT|TERM)|SignalException: Process \d+ got signal: (?:2|15)|CANCELLED AT .*(?:DUE TO TIME LIMIT)?|DUE TO TIME LIMIT|srun: (?:Job step aborted|forcing job termination)|interrupt \(one more within|mpirun: abort is already in progress|^\s*Terminated\s*$|got signal: (?:SIGINT|SIGTERM)`)
	// Traceback lines after Ctrl-C, and a frame that names a collective.
	reTraceLine = regexp.MustCompile(`^\s*(?:Traceback \(most recent call last\):|File "[^"]+", line \d+|\S.*Error:|During handling of the above exception|The above exception was the direct cause|\^+\s*$|~+\^*~*\s*$|[A-Za-z_][\w.]*\(.*\)\s*$|[\w.]+ = .*$|return .*$|\w+\s*$)`)
	reCollCall  = regexp.MustCompile(`\b(all_reduce|allreduce|all_gather\w*|reduce_scatter\w*|broadcast\w*|barrier|all_to_all\w*|init_process_group|new_group|send|recv|reduce)\(`)
	reNoiseLine = regexp.MustCompile(`^\s*(?:#|\*{5,}|warnings\.warn\(|Setting OMP_NUM_THREADS|WARNING:torch\.distributed|W\d{4} |\[W |\[I |I\d{4} |\S+Warning: |\s*_?warn|srun: |Loaded |Using (?:device|backend)\b|world_size|rank \d+/\d+|MASTER_(?:ADDR|PORT)|export |NCCL_\w+=)`)
	// PyTorch's warnings at a normal exit without destroy_process_group
	// (ProcessGroupNCCL's destructor; distributed_c10d.py at exit).
	reFinished   = regexp.MustCompile(`- (?:Destroy|Abort) COMPLETE|^# Avg bus bandwidth|^# Out of bounds values|has NOT been destroyed before (?:we destruct ProcessGroupNCCL|it is being destructed)|destroy_process_group\(\) was not called before program exit`)
	reNCCLINFOAt = regexp.MustCompile(` NCCL (?:INFO|TRACE) |^NCCL (?:INFO|TRACE) |^NCCL version \d`)
)

// classifyEnd reads an input's last lines backwards: noise and blank lines
// are skipped, an interrupt (and its traceback) is noted and skipped, and
// the first remaining line decides.
func classifyEnd(file string, lines [][]byte, firstLine int64) inputEnd {
	e := inputEnd{file: file, kind: endNone}
	inTrace := false
	for i := len(lines) - 1; i >= 0; i-- {
		raw := lines[i]
		n := firstLine + int64(i)
		text := bytes.TrimRight(raw, "\r")
		m := parseMeta(text)
		msg := bytes.TrimSpace(m.Msg)
		ev := func() *Evidence {
			t := string(truncText(text))
			return &Evidence{File: file, Line: n, Text: t, Rank: m.Rank, Host: m.Host, PID: m.PID}
		}
		switch {
		case len(msg) == 0 && m.Level == "":
			continue
		case reFinished.Match(text):
			// Communicators torn down, or nccl-tests' summary: the job
			// got past its collectives.
			e.kind = endProgress
			return e
		case reNCCLINFOAt.Match(text) || (m.Level == "INFO" || m.Level == "TRACE") && bytes.Contains(text, []byte("NCCL")):
			e.kind, e.lastNCCL = endNCCL, ev()
			return e
		case reInterrupt.Match(msg) || reInterrupt.Match(text):
			if !e.interrupted {
				e.interrupted, e.interrupt = true, ev()
			}
			inTrace = true
			continue
		case e.interrupted && inTrace && (reTraceLine.Match(msg) || bytes.HasPrefix(msg, []byte("File \""))):
			if e.frame == "" {
				if sm := reCollCall.FindSubmatch(msg); sm != nil {
					e.frame = string(sm[1])
				}
			}
			continue
		case e.interrupted && isLauncherSummary(msg):
			continue
		case m.Level == "WARN" || m.Level == "E" || m.Level == "F" || m.Level == "ABORT":
			e.kind = endError
			return e
		case m.Level == "W" || m.Level == "I" || reNoiseLine.Match(msg):
			continue
		case classifyError(msg) != "":
			e.kind = endError
			return e
		}
		e.kind = endProgress
		return e
	}
	return e
}

// isLauncherSummary is torchrun's failure report printed after workers
// were stopped by a signal.
func isLauncherSummary(msg []byte) bool {
	for _, p := range [][]byte{[]byte("===="), []byte("Failures:"), []byte("Root Cause"), []byte("[0]:"), []byte("time      :"),
		[]byte("host      :"), []byte("rank      :"), []byte("exitcode  :"), []byte("error_file:"), []byte("traceback :"),
		[]byte("<NO_OTHER_FAILURES>"), []byte("To enable traceback"), []byte("torch.distributed.elastic"), []byte("raise "),
		[]byte("Signal "), []byte("ChildFailedError"), []byte("sys.exit("), []byte("elastic_launch"), []byte("run(args)"),
		[]byte("return launch_agent"), []byte("return f(*args"), []byte("main()"), []byte("----")} {
		if bytes.Contains(msg, p) {
			return true
		}
	}
	return false
}
