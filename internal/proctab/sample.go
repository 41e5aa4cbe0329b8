package proctab

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ncclwiz/ncclwiz/host"
)

// Task is one thread of a process.
type Task struct {
	TID      int
	State    string
	CPUTicks uint64
}

// Tasks lists the threads of pid (/proc/PID/task/TID/stat), by TID.
// gopsutil's Threads is not used: it returns CPU times without the thread
// state, and costs a getpriority(2) and a /proc/stat read per thread.
func Tasks(h *host.Host, pid int) ([]Task, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := h.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]Task, 0, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := h.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue // the thread exited meanwhile
		}
		st, err := parseStat(b)
		if err != nil {
			continue
		}
		out = append(out, Task{TID: tid, State: st.state, CPUTicks: st.cpuTicks})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out, nil
}

// Progress is what two samples of one process, Interval apart, showed.
type Progress struct {
	PID      int
	Interval time.Duration
	// Gone is true when the process exited, or its PID was reused, between
	// the samples; nothing else is then meaningful.
	Gone bool
	// CPUTicks is the CPU time the thread group used between the samples
	// (the larger of the process's total and the sum over its threads).
	CPUTicks uint64
	// Threads is the number of threads in the second sample; RanThreads of
	// them used CPU between the samples, NewThreads appeared.
	Threads, RanThreads, NewThreads int
	// Blocked lists threads in uninterruptible sleep (D) in either sample:
	// they may be doing I/O, which is progress the CPU time cannot show.
	Blocked []int
	// Live is the number of threads not zombie or dead in the second sample.
	Live int
	// MainCPUTicks is what the main thread (the thread-group leader) used.
	MainCPUTicks uint64
	// IOKnown says the I/O accounting was readable (the process's user or
	// root); Wrote and MainWrote are then the bytes the process, and its
	// main thread, passed to write-like calls between the samples (files,
	// pipes, sockets): a rank that logs or sends is doing something.
	IOKnown          bool
	Wrote, MainWrote uint64
	// Reads is how many times the threads' states were read during the
	// interval; RunnableReads how many of those found a thread runnable
	// (R): a thread that wants the CPU on a loaded machine may get little
	// of it, but it is seen runnable.
	Reads, RunnableReads int
}

// Progressed reports whether the sample saw the process do anything.
func (p Progress) Progressed() bool {
	return !p.Gone && (p.CPUTicks > 0 || p.RanThreads > 0 || p.NewThreads > 0 || len(p.Blocked) > 0)
}

// CPU returns the CPU time used over the interval.
func (p Progress) CPU() time.Duration { return time.Duration(p.CPUTicks) * time.Second / UserHZ }

// String says what the sample saw, for evidence.
func (p Progress) String() string {
	switch {
	case p.Gone:
		return "exited during the sample"
	case len(p.Blocked) > 0:
		return fmt.Sprintf("%d thread(s) in uninterruptible I/O wait (D) during the %s sample", len(p.Blocked), p.Interval)
	case p.Progressed():
		return fmt.Sprintf("used %s of CPU in %d of %d threads over %s", p.CPU(), p.RanThreads, p.Threads, p.Interval)
	}
	if p.Threads == 0 {
		return fmt.Sprintf("no CPU used over %s", p.Interval)
	}
	return fmt.Sprintf("no CPU used by any of its %d threads over %s", p.Threads, p.Interval)
}

type snapshot struct {
	start, total uint64
	tasks        map[int]Task
	io, mainIO   IO
	ioOK         bool
}

func take(h *host.Host, pid int) (snapshot, error) {
	p, err := readStat(h, "/proc/"+strconv.Itoa(pid))
	if err != nil {
		return snapshot{}, err
	}
	// Without a task directory (a fixture that has none) the thread
	// group's total still tells progress.
	ts, _ := Tasks(h, pid)
	s := snapshot{start: p.StartTicks, total: p.CPUTicks, tasks: map[int]Task{}}
	for _, t := range ts {
		s.tasks[t.TID] = t
	}
	var err1, err2 error
	s.io, err1 = ReadIO(h, pid, 0)
	s.mainIO, err2 = ReadIO(h, pid, pid)
	s.ioOK = err1 == nil && err2 == nil
	return s, nil
}

// sampleReads is how often the threads' states are read over a sample.
const sampleReads = 20

// Sample reads the CPU times of every thread of each process twice,
// interval apart (and the threads' states sampleReads times in between),
// and says which made progress. A process that cannot be read in the
// first sample is left out of the answer.
func Sample(ctx context.Context, h *host.Host, pids []int, interval time.Duration) (map[int]Progress, error) {
	first := map[int]snapshot{}
	for _, pid := range pids {
		if s, err := take(h, pid); err == nil {
			first[pid] = s
		}
	}
	out := map[int]Progress{}
	if len(first) == 0 {
		return out, nil
	}
	reads, runnable := map[int]int{}, map[int]int{}
	began := time.Now()
	for k := 1; k <= sampleReads; k++ {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("CPU sample: %w", ctx.Err())
		case <-time.After(time.Until(began.Add(time.Duration(k) * interval / sampleReads))):
		}
		if k == sampleReads {
			break // the last read is the second full sample
		}
		for pid := range first {
			ts, err := Tasks(h, pid)
			if err != nil {
				continue
			}
			reads[pid]++
			for _, t := range ts {
				if t.State == "R" {
					runnable[pid]++
					break
				}
			}
		}
	}
	for pid, a := range first {
		pr := Progress{PID: pid, Interval: interval, Reads: reads[pid], RunnableReads: runnable[pid]}
		b, err := take(h, pid)
		if err != nil || b.start != a.start {
			pr.Gone = true
			out[pid] = pr
			continue
		}
		var sum uint64
		for tid, tb := range b.tasks {
			ta, seen := a.tasks[tid]
			switch {
			case !seen:
				pr.NewThreads++
				sum += tb.CPUTicks
			case tb.CPUTicks > ta.CPUTicks:
				pr.RanThreads++
				sum += tb.CPUTicks - ta.CPUTicks
			}
			if tb.State == "D" || (seen && ta.State == "D") {
				pr.Blocked = append(pr.Blocked, tid)
			}
			if tb.State != "Z" && tb.State != "X" {
				pr.Live++
			}
		}
		sort.Ints(pr.Blocked)
		if ta, ok := a.tasks[pid]; ok {
			if tb, ok := b.tasks[pid]; ok && tb.CPUTicks > ta.CPUTicks {
				pr.MainCPUTicks = tb.CPUTicks - ta.CPUTicks
			}
		}
		if a.ioOK && b.ioOK {
			pr.IOKnown = true
			pr.Wrote = sub(b.io.WChar, a.io.WChar)
			pr.MainWrote = sub(b.mainIO.WChar, a.mainIO.WChar)
		}
		pr.Threads = len(b.tasks)
		pr.CPUTicks = sum
		if b.total > a.total && b.total-a.total > sum {
			pr.CPUTicks = b.total - a.total // threads that ran and exited in between
		}
		out[pid] = pr
	}
	return out, nil
}

func sub(b, a uint64) uint64 {
	if b > a {
		return b - a
	}
	return 0
}
