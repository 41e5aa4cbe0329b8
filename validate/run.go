package validate

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ncclwiz/ncclwiz/explain"
	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/internal/units"
)

// Run prepares and runs the ladder. Before anything starts it returns a
// *CannotRunError (see errors.As) when no GPU or no backend is available.
// A rung that fails is a result, not an error.
func Run(ctx context.Context, h *host.Host, opts Options) (*Result, error) {
	p, err := Prepare(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Execute(ctx)
}

// maxLogBytes caps a rung's log file; NCCL INFO output of 8 ranks is a few
// MB, so this only stops a runaway process from filling the disk.
const maxLogBytes = 64 << 20

// logTailLines is how much of a rung's output the result keeps.
const logTailLines = 40

// Execute runs the planned rungs in ladder order.
func (p *Plan) Execute(ctx context.Context) (*Result, error) {
	emit := func(e Event) {
		if p.opts.OnEvent != nil {
			p.opts.OnEvent(e)
		}
	}
	if err := p.ensureTmp(); err != nil {
		return nil, err
	}
	p.ensureRunID()
	logDir := p.tmpDir
	if p.opts.LogDir != "" {
		if err := os.MkdirAll(p.opts.LogDir, 0o700); err != nil {
			return nil, fmt.Errorf("log directory: %w", err)
		}
		logDir = p.opts.LogDir
	}
	script := filepath.Join(p.tmpDir, "collective.py")
	if p.Backend == BackendTorchrun {
		if err := os.WriteFile(script, CollectiveScript, 0o600); err != nil {
			return nil, fmt.Errorf("write the test script: %w", err)
		}
	}
	all := p.systemFor(p.GPUs)
	res := &Result{
		Schema: ResultSchema, Backend: p.Backend, Launcher: p.Launcher, Python: p.Python,
		Torch: p.Torch, NCCL: p.NCCL, GPUs: p.GPUs, System: all.Describe(),
		Notes: append([]string{}, p.Notes...), RunID: p.runID,
	}
	var ids []string
	for _, r := range p.Rungs {
		ids = append(ids, r.ID)
	}
	emit(Event{Kind: EventPlan, Text: fmt.Sprintf("%s backend (%s); %s: %s; rungs: %s",
		p.Backend, p.Launcher, units.Count(p.GPUs, "GPU"), res.System, strings.Join(ids, ", "))})
	for _, n := range res.Notes {
		emit(Event{Kind: EventNote, Text: n})
	}

	ex := &explainer{}
	for _, r := range p.Rungs {
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		rr := p.runRung(ctx, r, script, logDir, ex, emit)
		if res.Containment == "" {
			res.Containment = rr.Containment
		}
		if p.opts.LogDir == "" {
			rr.LogFile = "" // removed with the private directory
		}
		res.Rungs = append(res.Rungs, rr)
		emit(Event{Kind: EventRungDone, Rung: r.ID, Result: &res.Rungs[len(res.Rungs)-1]})
		if rr.Canceled {
			res.Interrupted = true
			break
		}
	}
	for _, id := range ladderIDs {
		if why, ok := p.Skipped[id]; ok {
			res.Rungs = append(res.Rungs, RungResult{Rung: Rung{ID: id}, Status: Skipped, Reasons: []string{why}})
		}
	}
	for _, n := range p.Notes {
		if !slices.Contains(res.Notes, n) {
			res.Notes = append(res.Notes, n)
		}
	}
	res.AB = compareAB(res.Rungs, p.Candidate)
	res.Pass, res.Verdict = overall(res)
	return res, nil
}

func (p *Plan) systemFor(ranks int) system {
	return buildSystem(p.snap, p.visible, p.visErr, ranks)
}

// runRung runs one rung (retrying once with a new port if torchrun's port
// was taken meanwhile) and judges it.
func (p *Plan) runRung(ctx context.Context, r Rung, script, logDir string, ex *explainer, emit func(Event)) RungResult {
	rr := RungResult{Rung: r}
	env, set := p.rungEnv(r)
	rr.SetEnv = set
	logPath := filepath.Join(logDir, r.ID+".log")
	rr.LogFile = logPath

	var (
		run    procResult
		runErr error
		ps     *parser
		tail   []string
	)
	for attempt := 0; attempt < 2; attempt++ {
		port, err := freePort()
		if err != nil {
			rr.Status, rr.Reasons = Fail, []string{"no free TCP port on 127.0.0.1: " + err.Error()}
			return rr
		}
		jsonPath := filepath.Join(p.tmpDir, r.ID+".json")
		_ = os.Remove(jsonPath)
		path, args := p.command(r, port, script, jsonPath)
		rr.Command = append([]string{path}, args...)
		emit(Event{Kind: EventRungStart, Rung: r.ID, Text: r.Title, Command: rr.Command, Env: r.Env})

		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			rr.Status, rr.Reasons = Fail, []string{"cannot write the rung log: " + err.Error()}
			return rr
		}
		lw := bufio.NewWriterSize(lf, 64<<10)
		var written int64
		ps = newParser(r.Ranks)
		tail = tail[:0]
		var mu sync.Mutex // OnLine runs on the reader goroutine
		before, shmErr := listShm(p.h)
		run, runErr = runProcess(ctx, procSpec{
			Path: path, Args: args, Env: env, Dir: p.tmpDir, Marker: p.runID, TmpDir: p.tmpDir, Contain: p.opts.Contain,
			Timeout: p.opts.Timeout, Grace: p.opts.Grace,
			OnLine: func(s string) {
				mu.Lock()
				defer mu.Unlock()
				if written < maxLogBytes {
					n, _ := lw.WriteString(s + "\n")
					written += int64(n)
				}
				if len(tail) == logTailLines {
					copy(tail, tail[1:])
					tail = tail[:logTailLines-1]
				}
				tail = append(tail, s)
				for _, e := range ps.line(s) {
					e.Rung = r.ID
					emit(e)
				}
			},
		})
		_ = lw.Flush()
		_ = lf.Close()
		rr.Containment = run.Containment
		for _, n := range run.Notes {
			if !slices.Contains(p.Notes, n) {
				p.Notes = append(p.Notes, n)
			}
		}
		after, shmErr2 := listShm(p.h)
		rr.LeftoverShm = newSince(before, after)
		if shmErr != nil || shmErr2 != nil {
			e := shmErr
			if e == nil {
				e = shmErr2
			}
			rr.Notes = append(rr.Notes, "could not check "+p.h.ShmLogical()+" for leftover segments: "+e.Error())
		}
		if p.Backend == BackendNCCLTests {
			p.mergeJSON(ps, jsonPath, &rr)
		}
		retry := p.Backend == BackendTorchrun && ps.addrInUse && run.ExitCode != 0 && !run.Canceled && len(ps.sizes) == 0
		if !retry || attempt == 1 {
			break
		}
		emit(Event{Kind: EventNote, Rung: r.ID, Text: "the rendezvous port was taken meanwhile; retrying with another"})
	}
	rr.LogTail = append([]string{}, tail...)
	judge(&rr, judgeInput{
		backend: p.Backend, sys: p.systemFor(r.Ranks), run: run, runErr: runErr, parser: ps,
		tolerance: p.tolerance, timeout: p.opts.Timeout, nSizes: len(p.sizes), maxBytes: p.maxBytes,
		shmDir: p.h.ShmLogical(),
	})
	if rr.Status == Fail && !rr.Canceled {
		rr.Diagnosis = ex.diagnose(ctx, logPath)
	}
	return rr
}

// mergeJSON prefers all_reduce_perf's JSON file to its table when it
// exists: the same numbers without parsing columns.
func (p *Plan) mergeJSON(ps *parser, path string, rr *RungResult) {
	if !p.perfJSON {
		return
	}
	rows, oob, avg, err := parseNCCLTestsJSON(path)
	if err != nil {
		if !os.IsNotExist(err) {
			rr.Notes = append(rr.Notes, "the nccl-tests JSON output could not be read ("+err.Error()+"); the table was used")
		}
		return
	}
	if len(rows) == 0 {
		return
	}
	ps.sizes, ps.sOrder = map[sizeKey]*SizeResult{}, nil
	for _, r := range rows {
		ps.putSize(r)
	}
	if oob != nil {
		ps.oob = oob
	}
	if avg != nil {
		ps.avgBW, ps.hasAvg = *avg, true
	}
}

// rungEnv is the explicit environment of a rung, and the variables the
// test set (for display).
func (p *Plan) rungEnv(r Rung) ([]string, []string) {
	set := []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,ENV"}
	set = append(set, r.Env...)
	if p.Backend == BackendTorchrun {
		var sz []string
		for _, s := range p.sizes {
			sz = append(sz, strconv.FormatInt(s, 10))
		}
		coll := int(p.opts.Timeout.Seconds()) - 15
		if coll < 10 {
			coll = 10
		}
		set = append(set, "NCCLWIZ_SIZES="+strings.Join(sz, ","), "NCCLWIZ_COLL_TIMEOUT="+strconv.Itoa(coll))
	}
	env := setEnv(p.baseEnv, append(append([]string{}, set...), MarkerVar+"="+p.runID)...)
	return env, set
}

// command builds the launcher's argv for a rung.
func (p *Plan) command(r Rung, port int, script, jsonPath string) (string, []string) {
	if p.Backend == BackendNCCLTests {
		args := []string{"-b", "8", "-e", FormatSizeArg(p.maxBytes), "-f", "2", "-g", strconv.Itoa(r.Ranks), "-c", "1"}
		if p.perfJSON {
			args = append(args, "-J", jsonPath)
		}
		return p.perf, args
	}
	args := []string{
		"--nnodes=1", "--nproc_per_node=" + strconv.Itoa(r.Ranks),
		"--master_addr=127.0.0.1", "--master_port=" + strconv.Itoa(port),
		"--max_restarts=0", script,
	}
	if p.torchrun != "" {
		return p.torchrun, args
	}
	return p.python, append([]string{"-m", "torch.distributed.run"}, args...)
}

// freePort asks the kernel for a free port on the loopback address. It is
// released before torchrun binds it; a rare clash is retried once.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// explainer runs the log explainer on failed rungs; it is built once, on
// first use.
type explainer struct {
	once sync.Once
	e    *explain.Explainer
}

func (x *explainer) diagnose(ctx context.Context, logPath string) *Diagnosis {
	x.once.Do(func() {
		e, err := explain.New(explain.Options{})
		if err == nil {
			x.e = e
		}
	})
	if x.e == nil {
		return nil
	}
	rep, err := x.e.Analyze(ctx, []explain.Input{explain.FileInput(logPath)})
	if err != nil || rep == nil || len(rep.Diagnoses) == 0 {
		return nil
	}
	d := rep.Diagnoses[0]
	for _, c := range rep.Diagnoses {
		if c.RootCause {
			d = c
			break
		}
	}
	out := &Diagnosis{ID: d.ID, Title: d.Title, Guide: d.Guide}
	if len(d.Evidence) > 0 {
		out.Line = d.Evidence[0].Text
	}
	return out
}
