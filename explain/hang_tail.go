package explain

import (
	"bytes"
	"regexp"

	"github.com/ncclwiz/ncclwiz/explain/internal/linetext"
)

// A log that just stops is judged by how it ends: the pipeline only shows
// the consumer the lines that may match something, so each input keeps its
// last lines (bounded) for the end-of-input judgement.
const (
	tailLines    = 200
	tailLineSize = 512
)

// tailKeeper holds the last tailLines lines of an input. Line buffers
// are reused from chunk to chunk.
type tailKeeper struct {
	lines [][]byte
	spare [][]byte
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
	// Find where the chunk's last tailLines lines start.
	start, n := end, 0
	for n < tailLines {
		i := bytes.LastIndexByte(data[:start], '\n')
		n++
		if i < 0 {
			start = 0
			break
		}
		start = i
		if n < tailLines {
			continue
		}
		start = i + 1
	}
	// Recycle the older lines that drop out.
	drop := min(max(len(t.lines)+n-tailLines, 0), len(t.lines))
	t.spare = append(t.spare, t.lines[:drop]...)
	t.lines = append(t.lines[:0], t.lines[drop:]...)
	for off := start; off <= end; {
		j := bytes.IndexByte(data[off:end], '\n')
		stop := end
		if j >= 0 {
			stop = off + j
		}
		line := data[off:stop]
		if len(line) > tailLineSize {
			line = trimPartialRune(line[:tailLineSize])
		}
		var buf []byte
		if k := len(t.spare); k > 0 {
			buf, t.spare = t.spare[k-1][:0], t.spare[:k-1]
		}
		t.lines = append(t.lines, append(buf, line...))
		if j < 0 {
			break
		}
		off = stop + 1
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
	// annotated: the paste ends with the reporter's own note that it
	// hangs ("<stuck here>", "... hangs forever").
	annotated bool
	lastNCCL  *Evidence
	// opLine is the last "opCount" line of the tail, or 2.4–2.8's
	// "Launch mode" (printed by rank 0 at its first collective launch,
	// src/enqueue.cc): the first collective was issued.
	opLine *Evidence
	// frame is the collective a Ctrl-C traceback was inside
	// ("dist.all_reduce(t)"), when it shows one.
	frame string
	// framework: lastNCCL is a framework's "starting the process group"
	// line, not NCCL's own.
	framework bool
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
	// A reporter's note at the end of a paste, and elisions.
	reHangNote = regexp.MustCompile(`(?i)^[\s<(\[#*/>-]*(?:\.\.\.|…)?\s*(?:(?:and |then |it |the job |training |process(?:es)? |program )*(?:hangs?|hung|hanging|stuck|freezes|frozen|blocks?|waits?)\b[^.]{0,60}|no (?:more )?output\b.{0,40}|nothing (?:happens|more)\b.{0,40})[.!)>\]]*\s*$`)
	reElision  = regexp.MustCompile(`^\s*(?:\.\.\.+|…|\[\.\.\.\]|\(\.\.\.\)|<snip>|\[snip\]|---+)\s*$`)
	reFinished = regexp.MustCompile(`- (?:Destroy|Abort) COMPLETE|^# Avg bus bandwidth|^# Out of bounds values|has NOT been destroyed before (?:we destruct ProcessGroupNCCL|it is being destructed)|destroy_process_group\(\) was not called before program exit`)
	// reLaunchCmd is a command that starts (or runs) a job, after any
	// VAR=value assignments and sudo/env/time/nohup.
	reLaunchCmd  = regexp.MustCompile(`^(?:\w+=\S*\s+)*(?:(?:sudo|env|time|nohup|exec)\s+)*(?:\S*/)?(?:torchrun|python[\d.]*|srun|sbatch|salloc|mpirun|mpiexec|deepspeed|accelerate|horovodrun|ray|vllm|sglang|lightning|docker|podman|apptainer|singularity|kubectl|bash|sh|uv|conda)\b|^\./|\.sh\b`)
	reNCCLINFOAt = regexp.MustCompile(` NCCL (?:INFO|TRACE) |^NCCL (?:INFO|TRACE) |^NCCL version \d`)
)

// classifyEnd reads an input's last lines backwards: noise and blank lines
// are skipped, an interrupt (and its traceback) is noted and skipped, and
// the first remaining line decides.
func classifyEnd(file string, lines [][]byte, firstLine int64, isInit func([]byte) bool) inputEnd {
	e := inputEnd{file: file, kind: endNone}
	// A paste that goes on with the user's next command at a shell
	// prompt: the job's output ended before the prompt. A prompt that
	// launched the job is followed by the job's output, and so is one
	// whose output has NCCL's own lines, whatever its command (`cat` or
	// `tail -f` of the job's log, `cd … && torchrun`, `sudo -E torchrun`).
	for i := len(lines) - 1; i > 0; i-- {
		l := linetext.TrimQuote(bytes.TrimRight(lines[i], "\r"))
		if loc := reShellPrompt.FindIndex(l); loc != nil {
			if !reLaunchCmd.Match(l[loc[1]-1:]) && !hasNCCLLine(lines[i+1:]) {
				lines = lines[:i]
			}
			break
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if bytes.Contains(lines[i], []byte(": opCount ")) && reOpCount.Match(lines[i]) || bytes.Contains(lines[i], []byte("NCCL INFO Launch mode ")) {
			m := linetext.Parse(lines[i])
			e.opLine = &Evidence{File: file, Line: firstLine + int64(i), Text: string(truncText(lines[i])), Rank: m.Rank, Host: m.Host, PID: m.PID}
			break
		}
	}
	inTrace := false
	traceRank := -1 // the rank the interrupt's traceback is prefixed with
	var clean []byte
	fold := foldWidth(lines, false) // the width a folded paste was cut at
	// Two long lines cut at one width near the end: a narrow terminal
	// folds only the longest lines.
	tailFold := foldWidth(lines[max(0, len(lines)-24):], true)
	for i := len(lines) - 1; i >= 0; i-- {
		raw := lines[i]
		n := firstLine + int64(i)
		text := bytes.TrimRight(raw, "\r")
		if linetext.NeedsCleaning(text) {
			clean = linetext.StripANSI(clean[:0], text)
			text = bytes.TrimRight(clean, "\r")
		}
		text = linetext.TrimQuote(text)
		// What ends the line is the last process's output (an Open MPI
		// tag inside a line starts another's).
		for j := midTag(text); j >= 0; j = midTag(text) {
			text = text[j:]
		}
		m := linetext.Parse(text)
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
		case isInit != nil && isInit(stripLogLevel(msg)):
			e.kind, e.lastNCCL, e.framework = endNCCL, ev(), true
			return e
		case reInterrupt.Match(msg) || reInterrupt.Match(text):
			if !e.interrupted {
				e.interrupted, e.interrupt = true, ev()
				traceRank = m.Rank
			}
			inTrace = true
			continue
		case e.interrupted && inTrace && traceRank >= 0 && m.Rank != traceRank && m.Level != "WARN" && classifyError(msg) == "":
			// Another process's line amid the interrupted rank's
			// traceback (outputs interleave): not where that rank ended.
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
		case m.Level == "W" || m.Level == "I" || reNoiseLine.Match(msg) || reElision.Match(msg):
			continue
		case len(msg) < 100 && reHangNote.Match(msg):
			e.annotated = true
			continue
		case classifyError(msg) != "":
			e.kind = endError
			return e
		case i > 0 && (wrappedTail(lines[i-1], text, fold) || tailFold != fold && wrappedTail(lines[i-1], text, tailFold)):
			// The tail of a wrapped line (at the terminal's width, or at
			// a comma or colon): the line it continues decides.
			continue
		}
		e.kind = endProgress
		return e
	}
	return e
}

// hasNCCLLine tells whether any of lines is one of NCCL's own (INFO,
// TRACE or WARN, or its version banner): the job's output, not a shell
// command's.
func hasNCCLLine(lines [][]byte) bool {
	for _, l := range lines {
		if reNCCLINFOAt.Match(l) || bytes.Contains(l, []byte("NCCL WARN ")) {
			return true
		}
	}
	return false
}

// wrappedTail tells whether text is the second part of prev wrapped at
// the paste's fold width or at punctuation.
func wrappedTail(prev, text []byte, fold int) bool {
	prev = bytes.TrimRight(prev, "\r")
	n := len(prev)
	switch {
	case fold > 0 && n == fold:
		return continuation(prev, text, fold, fold) != nil
	case n >= minPunctCut && (prev[n-1] == ',' || prev[n-1] == ':'):
		return continuation(prev, text, n, 0) != nil
	}
	return false
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
