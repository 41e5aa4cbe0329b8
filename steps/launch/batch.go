package launch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ncclwiz/ncclwiz/internal/units"
)

// gasInfo is a gradient-accumulation setting found on the command line or
// in a config file.
type gasInfo struct {
	value int
	where string
}

// dsConfig holds the batch settings of a DeepSpeed JSON config; 0 means
// absent, "auto" (filled in by the HF Trainer) sets auto.
type dsConfig struct {
	name              string
	tbs, micro, gas   int
	auto              bool
	read, unreadable  bool
	unreadableBecause string
}

// scriptScan is what the script's own arguments say about batching.
type scriptScan struct {
	globalBatch string // a --global_batch_size style argument
	ds          *dsConfig
}

// gasNames are script arguments that set gradient accumulation (HF
// Trainer, common training scripts, Lightning).
var gasNames = map[string]bool{"gradient_accumulation_steps": true, "grad_accum_steps": true, "gradient_accumulation": true,
	"grad_accum": true, "accumulate_grad_batches": true, "accum_steps": true}

// scanScriptArgs looks through the script's arguments for gradient
// accumulation, a global batch size and a DeepSpeed config file. They are
// only read, never changed.
func (j *job) scanScriptArgs(script []Word) {
	j.scriptLen = len(script)
	if len(script) == 0 {
		return
	}
	for i := 1; i < len(script); i++ {
		w := script[i]
		if !strings.HasPrefix(w.Value, "-") {
			continue
		}
		name, val, eq := strings.Cut(w.Value, "=")
		dyn := w.Dynamic
		if !eq && i+1 < len(script) && !strings.HasPrefix(script[i+1].Value, "-") {
			val, dyn = script[i+1].Value, script[i+1].Dynamic
		} else if !eq {
			val = ""
		}
		c := canon(name)
		switch {
		case gasNames[c]:
			if n, err := strconv.Atoi(val); err == nil && !dyn && n > 0 {
				j.gas = gasInfo{value: n, where: "the script's " + name}
			}
		case c == "global_batch_size":
			j.scan.globalBatch = name
		case (c == "deepspeed" || c == "deepspeed_config") && strings.HasSuffix(val, ".json") && !dyn:
			j.deepspeedJSON(val)
		}
	}
}

// deepspeedJSON reads a DeepSpeed config for its batch settings.
func (j *job) deepspeedJSON(name string) {
	if j.scan.ds != nil {
		return
	}
	ds := &dsConfig{name: name}
	j.scan.ds = ds
	if j.opt.ReadFile == nil {
		ds.unreadable, ds.unreadableBecause = true, "not read"
		return
	}
	b, err := j.opt.ReadFile(name)
	if err != nil {
		ds.unreadable, ds.unreadableBecause = true, "could not be read here"
		return
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		ds.unreadable, ds.unreadableBecause = true, "is not valid JSON"
		return
	}
	ds.read = true
	get := func(k string) int {
		switch v := m[k].(type) {
		case float64:
			if v > 0 && v == float64(int(v)) {
				return int(v)
			}
		case string:
			if v == "auto" {
				ds.auto = true
			}
		}
		return 0
	}
	ds.tbs, ds.micro, ds.gas = get("train_batch_size"), get("train_micro_batch_size_per_gpu"), get("gradient_accumulation_steps")
	if ds.gas > 0 && j.gas.value == 0 {
		j.gas = gasInfo{value: ds.gas, where: "gradient_accumulation_steps in " + name}
	}
}

// batchNotes explains what happens to the global batch and how to keep it.
func batchNotes(r Result, gas gasInfo, scan scriptScan) []string {
	nodes := max(r.Nodes, 1)
	factor := r.Processes * nodes
	if r.Processes == 1 && nodes == 1 {
		return []string{"The original already ran a single process, so the batch size does not change."}
	}
	var notes []string
	fs := ""
	if factor > 1 {
		fs = strconv.Itoa(factor)
		if nodes > 1 {
			notes = append(notes, fmt.Sprintf("The job ran %s on each of %d nodes (%d in all); now 1.", units.Count(r.Processes, "process", "processes"), nodes, factor))
		} else {
			notes = append(notes, fmt.Sprintf("The job ran %d processes; now 1.", factor))
		}
	} else {
		notes = append(notes, "The job ran one process per GPU (how many is only known on the machine); now 1.")
	}
	if scan.globalBatch != "" {
		return append(notes, fmt.Sprintf("The script sets a global batch (%s): it derives gradient accumulation from it, so the global batch stays the same and each step takes about %s as long.", scan.globalBatch, times(fs)))
	}
	if ds := scan.ds; ds != nil && ds.read && !ds.auto && (ds.tbs > 0 || ds.micro > 0) {
		return append(notes, deepspeedBatch(ds, factor)...)
	}
	shrink := "shrinks " + times(fs) + " (per-GPU batch × processes × accumulation)"
	if gas.value > 0 && factor > 1 {
		notes = append(notes, fmt.Sprintf("The global batch %s. To keep it, raise %s from %d to %d (ncclwiz does not change script arguments); the learning-rate schedule then stays comparable.",
			shrink, gas.where, gas.value, gas.value*factor))
	} else {
		notes = append(notes, fmt.Sprintf("The global batch %s. To keep it, multiply gradient accumulation by %s (or the per-GPU batch, if memory allows); the learning-rate schedule then stays comparable.",
			shrink, orWord(fs, "the number of GPUs the job used")))
	}
	if ds := scan.ds; ds != nil && (ds.unreadable || ds.auto) {
		why := "its batch settings are \"auto\" (filled in from the training arguments)"
		if ds.unreadable {
			why = "it " + ds.unreadableBecause
		}
		notes = append(notes, fmt.Sprintf("Check %s too (%s): DeepSpeed requires train_batch_size = micro batch × accumulation × GPUs.", ds.name, why))
	}
	return notes
}

// deepspeedBatch applies DeepSpeed's batch arithmetic (runtime/config.py,
// _set_batch_related_parameters) to a world of one GPU.
func deepspeedBatch(ds *dsConfig, factor int) []string {
	n := ds.name
	switch {
	case ds.tbs > 0 && ds.micro > 0 && ds.gas > 0:
		if ds.tbs%ds.micro != 0 {
			return []string{fmt.Sprintf("%s sets train_batch_size %d, micro batch %d and accumulation %d; DeepSpeed requires train_batch_size = micro × accumulation × GPUs, which no whole accumulation satisfies on one GPU: set train_batch_size to a multiple of %d.", n, ds.tbs, ds.micro, ds.gas, ds.micro)}
		}
		return []string{fmt.Sprintf("%s sets train_batch_size %d, micro batch %d and accumulation %d; DeepSpeed stops at start-up unless train_batch_size = micro × accumulation × GPUs, so on one GPU set gradient_accumulation_steps to %d (keeps the global batch of %d).", n, ds.tbs, ds.micro, ds.gas, ds.tbs/ds.micro, ds.tbs)}
	case ds.tbs > 0 && ds.micro > 0:
		return []string{fmt.Sprintf("%s sets train_batch_size %d and micro batch %d, so DeepSpeed derives accumulation = %d on one GPU: the global batch stays %d and each step takes longer.", n, ds.tbs, ds.micro, ds.tbs/ds.micro, ds.tbs)}
	case ds.tbs > 0 && ds.gas > 0:
		return []string{fmt.Sprintf("%s sets train_batch_size %d and accumulation %d, so DeepSpeed derives the micro batch per GPU = %d on one GPU (%s the original): it may not fit in memory. Set train_micro_batch_size_per_gpu to the old value and gradient_accumulation_steps to %d instead.", n, ds.tbs, ds.gas, ds.tbs/ds.gas, times(strconv.Itoa(factor)), ds.gas*max(factor, 1))}
	case ds.tbs > 0:
		return []string{fmt.Sprintf("%s sets only train_batch_size %d, so on one GPU DeepSpeed makes the micro batch %d (%s the original): it may not fit in memory; set train_micro_batch_size_per_gpu and gradient_accumulation_steps explicitly.", n, ds.tbs, ds.tbs, times(strconv.Itoa(factor)))}
	case ds.micro > 0 && factor > 1:
		g := max(ds.gas, 1)
		return []string{fmt.Sprintf("%s sets micro batch %d and accumulation %d, so the global batch shrinks from %d to %d; set gradient_accumulation_steps to %d to keep it.", n, ds.micro, g, ds.micro*g*factor, ds.micro*g, g*factor)}
	}
	return []string{fmt.Sprintf("%s: DeepSpeed computes train_batch_size = micro batch × accumulation × GPUs; multiply gradient_accumulation_steps by the number of GPUs the job used to keep the global batch.", n)}
}

func times(f string) string {
	if f == "" {
		return "by the number of GPUs the job used"
	}
	return f + "×"
}

func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// accelCfg is what an accelerate config file says.
type accelCfg struct {
	name                      string
	numProcesses, numMachines int
	gas                       int
	notes                     []string
}

// accelerateConfig reads the config file accelerate will use: the one
// named by --config_file, else the default config if it exists.
func (j *job) accelerateConfig(opts []opt) accelCfg {
	var c accelCfg
	explicit := false
	if i := find(opts, "--config_file"); i >= 0 {
		if opts[i].dynamic {
			c.notes = append(c.notes, fmt.Sprintf("The config file %s is only known at run time; check that its gpu_ids and num_machines do not pin other GPUs or machines (command-line flags override num_processes).", opts[i].raw))
			return c
		}
		c.name, explicit = opts[i].value, true
	} else if j.opt.AccelerateDefaultConfig != "" {
		c.name = j.opt.AccelerateDefaultConfig
	}
	if c.name == "" {
		return c
	}
	if j.opt.ReadFile == nil {
		if explicit {
			c.notes = append(c.notes, fmt.Sprintf("ncclwiz did not read %s; command-line flags override its num_processes, but check that its gpu_ids and num_machines do not pin other GPUs or machines.", c.name))
		}
		return c
	}
	b, err := j.opt.ReadFile(c.name)
	if err != nil {
		if explicit {
			c.notes = append(c.notes, fmt.Sprintf("%s could not be read here; command-line flags override its num_processes, but check its gpu_ids and num_machines.", c.name))
		}
		if !explicit {
			c.name = ""
		}
		return c
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil || m == nil {
		c.notes = append(c.notes, fmt.Sprintf("%s is not valid YAML/JSON, so accelerate will fail on it as well.", c.name))
		return c
	}
	if !explicit {
		c.notes = append(c.notes, fmt.Sprintf("accelerate reads its default config %s (no --config_file was given).", c.name))
	}
	c.numProcesses = intField(m["num_processes"])
	c.numMachines = intField(m["num_machines"])
	if dt, _ := m["distributed_type"].(string); dt != "" && dt != "NO" {
		c.notes = append(c.notes, fmt.Sprintf("%s selects distributed_type: %s; accelerate still starts the script through its distributed launcher, now with one process — a world of one needs no NCCL traffic between GPUs.", c.name, dt))
	}
	if ids := fmt.Sprint(m["gpu_ids"]); m["gpu_ids"] != nil && ids != "all" && ids != "" {
		first, _, _ := strings.Cut(ids, ",")
		first = strings.TrimSpace(first)
		if j.opt.GPU == "" && first != "" {
			j.gpu, j.gpuFrom = first, "gpu_ids in "+c.name
		}
		c.notes = append(c.notes, fmt.Sprintf("%s pins gpu_ids: %s; accelerate sets CUDA_VISIBLE_DEVICES to that list itself, so the run uses its first GPU (%s). To pick another, set gpu_ids in a copy of the config.", c.name, ids, first))
	}
	if dsc, ok := m["deepspeed_config"].(map[string]any); ok {
		c.gas = intField(dsc["gradient_accumulation_steps"])
		if f, ok := dsc["deepspeed_config_file"].(string); ok && f != "" {
			j.deepspeedJSON(f)
		}
	}
	return c
}

func intField(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}
