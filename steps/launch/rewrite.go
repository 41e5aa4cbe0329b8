package launch

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Result is a rewritten command.
type Result struct {
	// Command is the one-GPU command line, ready to paste.
	Command string
	// Launcher names what was recognised: torchrun, python -m
	// torch.distributed.run, accelerate launch, deepspeed or python.
	Launcher string
	// GPU is the device the run uses.
	GPU string
	// Processes is how many processes the original started per node; 0
	// when it cannot be told here (one per visible GPU, a $VAR …).
	Processes int
	// Nodes is how many nodes the original spanned; 0 when unknown.
	Nodes int
	// Changes lists, one line each, what differs from the original.
	Changes []string
	// Notes explain consequences to check: the global batch, config files.
	Notes []string
	// Script is the script and its arguments exactly as written (the tail
	// of Command, never changed).
	Script string
}

// Options tune the rewrite.
type Options struct {
	// GPU is the device to run on. Default: the first entry of a
	// CUDA_VISIBLE_DEVICES assignment on the command line, else 0.
	GPU string
	// ReadFile reads config files named on the command line (accelerate
	// --config_file, a DeepSpeed JSON), relative to where the command
	// runs, so their process counts and batch sizes can be explained. Nil:
	// files are not read and the notes say what to check.
	ReadFile func(name string) ([]byte, error)
	// AccelerateDefaultConfig is the path of accelerate's default config
	// (~/.cache/huggingface/accelerate/default_config.yaml), which accelerate
	// reads when no --config_file is given; "" if unknown.
	AccelerateDefaultConfig string
}

// ErrCannotRewrite wraps every refusal, so callers can tell "explained, not
// rewritten" from other errors.
var ErrCannotRewrite = errors.New("cannot rewrite this command safely")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCannotRewrite, fmt.Sprintf(format, args...))
}

// job accumulates the rewrite.
type job struct {
	opt     Options
	res     Result
	gpu     string
	gpuFrom string // where the GPU choice came from
	prefix  []Word // env assignments and wrappers kept in front
	noCVD   bool   // the launcher picks the GPU itself (deepspeed)
	gas     gasInfo
	scan    scriptScan
	// scriptLen is how many trailing words are the script and its arguments.
	scriptLen int
}

// Rewrite turns the words of a launch command into a one-GPU command.
func Rewrite(words []Word, opt Options) (Result, error) {
	j := &job{opt: opt, gpu: opt.GPU, gpuFrom: "--gpu"}
	if j.gpu == "" {
		j.gpu, j.gpuFrom = "0", "the default"
	}
	if strings.ContainsAny(j.gpu, " \t\n'\"$`\\;|&<>(){}*?[]") {
		return Result{}, refuse("--gpu %q is not a device index or UUID", j.gpu)
	}
	rest, err := j.prefixWords(words)
	if err != nil {
		return Result{}, err
	}
	if len(rest) == 0 {
		return Result{}, refuse("there is no command after the environment assignments")
	}
	if rest[0].Dynamic {
		return Result{}, refuse("the program is %s, which the shell expands at run time; write the launcher's name (torchrun, accelerate, deepspeed, python)", rest[0].Raw)
	}
	out, err := j.dispatch(rest)
	if err != nil {
		return Result{}, err
	}
	j.res.GPU = j.gpu
	var final []Word
	if !j.noCVD {
		cvd := "CUDA_VISIBLE_DEVICES=" + j.gpu
		final = append(final, Word{Raw: "CUDA_VISIBLE_DEVICES=" + Quote(j.gpu), Value: cvd})
		j.res.Changes = append([]string{fmt.Sprintf("runs on GPU %s only: CUDA_VISIBLE_DEVICES=%s (GPU from %s)", j.gpu, j.gpu, j.gpuFrom)}, j.res.Changes...)
	}
	final = append(final, j.prefix...)
	final = append(final, out...)
	raws := make([]string, len(final))
	for i, w := range final {
		raws[i] = w.Raw
	}
	j.res.Command = strings.Join(raws, " ")
	j.res.Script = strings.Join(raws[len(raws)-j.scriptLen:], " ")
	j.res.Notes = append(batchNotes(j.res, j.gas, j.scan), j.res.Notes...)
	return j.res, nil
}

// prefixWords takes leading NAME=value assignments, `env NAME=value …` and
// `nohup`. CUDA_VISIBLE_DEVICES assignments are dropped (the rewrite sets
// its own) and give the default GPU.
func (j *job) prefixWords(words []Word) ([]Word, error) {
	i := 0
	for i < len(words) {
		w := words[i]
		if name, val, ok := assignment(w); ok {
			if name == "CUDA_VISIBLE_DEVICES" {
				j.noteCVD(w, val)
			} else {
				j.prefix = append(j.prefix, w)
			}
			i++
			continue
		}
		switch path.Base(w.Value) {
		case "env":
			if w.Dynamic {
				return nil, refuse("the program is %s; write it out", w.Raw)
			}
			j.prefix = append(j.prefix, w)
			i++
			if i < len(words) && strings.HasPrefix(words[i].Value, "-") {
				return nil, refuse("env %s: ncclwiz does not rewrite env with options; set the variables before the command instead", words[i].Raw)
			}
			continue
		case "nohup":
			j.prefix = append(j.prefix, w)
			i++
			continue
		}
		break
	}
	return words[i:], nil
}

func (j *job) noteCVD(w Word, val string) {
	if j.opt.GPU != "" {
		return
	}
	if w.Dynamic {
		j.res.Notes = append(j.res.Notes, fmt.Sprintf("CUDA_VISIBLE_DEVICES was %s, which is only known when the command runs; the rewrite uses GPU %s (pass --gpu N to choose another).", w.Raw, j.gpu))
		return
	}
	if first, _, _ := strings.Cut(val, ","); strings.TrimSpace(first) != "" {
		j.gpu, j.gpuFrom = strings.TrimSpace(first), "the first of CUDA_VISIBLE_DEVICES="+val
	}
}

// assignment reports whether w is a shell variable assignment: an unquoted
// NAME followed by = (a quoted "NAME=x" is a command name, not one).
func assignment(w Word) (name, val string, ok bool) {
	eq := strings.IndexByte(w.Raw, '=')
	if eq <= 0 || !isName(w.Raw[:eq]) {
		return "", "", false
	}
	name = w.Raw[:eq]
	return name, strings.TrimPrefix(w.Value, name+"="), true
}

func (j *job) dispatch(rest []Word) ([]Word, error) {
	prog := path.Base(rest[0].Value)
	switch {
	case prog == "torchrun":
		j.res.Launcher = "torchrun"
		return j.torchrun(rest[:1], rest[1:])
	case prog == "accelerate":
		if len(rest) < 2 || rest[1].Value != "launch" {
			return nil, refuse("only `accelerate launch` starts a job; %q is another accelerate command", strings.Join(values(rest[:min(2, len(rest))]), " "))
		}
		j.res.Launcher = "accelerate launch"
		return j.accelerate(rest[:2], rest[2:])
	case prog == "accelerate-launch":
		j.res.Launcher = "accelerate launch"
		return j.accelerate(rest[:1], rest[1:])
	case prog == "deepspeed" || prog == "ds":
		j.res.Launcher = "deepspeed"
		return j.deepspeed(rest[:1], rest[1:])
	case isPython(prog):
		return j.python(rest)
	case prog == "mpirun" || prog == "mpiexec" || prog == "srun" || prog == "orterun" || prog == "pdsh":
		return nil, refuse("%s starts processes across hosts; run the inner launch command (torchrun, accelerate launch, deepspeed or python) on one machine and rewrite that", prog)
	case prog == "bash" || prog == "sh" || prog == "zsh" || strings.HasSuffix(prog, ".sh"):
		return nil, refuse("%s runs a script whose launch line ncclwiz cannot see; rewrite the torchrun/accelerate/deepspeed/python line inside it", rest[0].Raw)
	}
	return nil, refuse("%s is not a launcher ncclwiz knows (torchrun, python -m torch.distributed.run/launch, accelerate launch, deepspeed, python); for a one-GPU run set CUDA_VISIBLE_DEVICES=%s and make it start one process", rest[0].Raw, j.gpu)
}

func values(ws []Word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Value
	}
	return out
}

func isPython(p string) bool {
	if p == "python" || p == "python3" || p == "python2" {
		return true
	}
	if v, ok := strings.CutPrefix(p, "python3."); ok {
		_, err := strconv.Atoi(v)
		return err == nil
	}
	return false
}

// pythonValueOpts are interpreter options that take a separate value.
const pythonValueOpts = "XWc"

// python handles `python [opts] script.py …` and `python [opts] -m module …`.
func (j *job) python(rest []Word) ([]Word, error) {
	i := 1
	for ; i < len(rest); i++ {
		w := rest[i]
		if w.Dynamic {
			return nil, refuse("%s before the script is expanded at run time, so ncclwiz cannot tell whether it is an interpreter option or the script", w.Raw)
		}
		v := w.Value
		if v == "-" || !strings.HasPrefix(v, "-") || v == "--" {
			break
		}
		if v == "-m" {
			if i+1 >= len(rest) {
				return nil, refuse("python -m needs a module name")
			}
			mod := rest[i+1]
			if mod.Dynamic {
				return nil, refuse("the module %s is only known at run time", mod.Raw)
			}
			head := rest[:i+2]
			switch mod.Value {
			case "torch.distributed.run", "torch.distributed.launch":
				j.res.Launcher = "python -m " + mod.Value
				return j.torchrun(head, rest[i+2:])
			case "accelerate.commands.launch":
				j.res.Launcher = "accelerate launch"
				return j.accelerate(head, rest[i+2:])
			case "deepspeed.launcher.runner":
				j.res.Launcher = "deepspeed"
				return j.deepspeed(head, rest[i+2:])
			}
			j.res.Launcher = "python"
			j.plainPython()
			j.scanScriptArgs(rest[i+1:])
			return rest, nil
		}
		if strings.HasPrefix(v, "--") {
			continue // --version, --help … no separate values
		}
		// Clustered single-letter flags (-uB); X, W and c take a value.
		for k := 1; k < len(v); k++ {
			if strings.IndexByte(pythonValueOpts, v[k]) >= 0 {
				if v[k] == 'c' {
					return nil, refuse("python -c runs inline code; ncclwiz cannot see how it starts processes")
				}
				if k == len(v)-1 {
					i++ // the value is the next word
				}
				break
			}
		}
	}
	if i >= len(rest) {
		return nil, refuse("python without a script starts an interactive interpreter, not a job")
	}
	j.res.Launcher = "python"
	j.plainPython()
	j.scanScriptArgs(rest[i:])
	return rest, nil
}

func (j *job) plainPython() {
	j.res.Processes = 1
	j.res.Notes = append(j.res.Notes, "A plain python command starts one process; with CUDA_VISIBLE_DEVICES it sees one GPU. "+
		"If the script starts one worker per GPU itself (torch.multiprocessing.spawn with torch.cuda.device_count()), it now starts one.")
}

// optSpec says how a launcher parses its options: which take a value and
// which are flags. An option in neither set is refused, because ncclwiz
// could not tell where the script starts.
type optSpec struct {
	values map[string]bool
	flags  map[string]bool
	// short options that take a value and may be glued to it (-r3).
	shortValues string
}

// names registers each option with underscores and with hyphens, the two
// spellings torchrun and accelerate accept.
func names(ns ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range ns {
		m[n] = true
		if strings.HasPrefix(n, "--") {
			m["--"+strings.ReplaceAll(n[2:], "_", "-")] = true
			m["--"+strings.ReplaceAll(n[2:], "-", "_")] = true
		}
	}
	return m
}

// opt is one parsed launcher option.
type opt struct {
	name    string
	value   string
	dynamic bool   // the value is only known at run time
	raw     string // the value as written
	words   []Word // the original words (1 or 2)
}

func (o opt) canon() string { return canon(o.name) }

func canon(name string) string { return strings.ReplaceAll(strings.TrimLeft(name, "-"), "-", "_") }

// parseOpts splits launcher options from the script and its arguments.
func parseOpts(args []Word, spec optSpec, launcher string) ([]opt, []Word, error) {
	var opts []opt
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !strings.HasPrefix(w.Value, "-") || w.Value == "-" {
			if w.Dynamic {
				return nil, nil, refuse("%s %s: this word is expanded at run time, so ncclwiz cannot tell whether it holds launcher options or the script; write it out", launcher, w.Raw)
			}
			return opts, args[i:], nil
		}
		if w.Value == "--" {
			if i+1 >= len(args) {
				break
			}
			if args[i+1].Dynamic {
				return nil, nil, refuse("%s -- %s: the script is only known at run time", launcher, args[i+1].Raw)
			}
			return opts, args[i:], nil // "--" stays: the script may start with "-"
		}
		name, val, hasEq := strings.Cut(w.Value, "=")
		if w.Dynamic && (strings.ContainsAny(name, "$*?[{") || !hasEq) {
			return nil, nil, refuse("%s %s: this option is expanded at run time; write it out", launcher, w.Raw)
		}
		switch {
		case spec.flags[name] && !hasEq:
			opts = append(opts, opt{name: name, words: []Word{w}})
		case spec.values[name] && hasEq:
			_, raw, _ := strings.Cut(w.Raw, "=")
			opts = append(opts, opt{name: name, value: val, dynamic: w.Dynamic, raw: raw, words: []Word{w}})
		case spec.values[name]:
			if i+1 >= len(args) {
				return nil, nil, refuse("%s: %s needs a value", launcher, name)
			}
			v := args[i+1]
			opts = append(opts, opt{name: name, value: v.Value, dynamic: v.Dynamic, raw: v.Raw, words: []Word{w, v}})
			i++
		case len(name) > 2 && name[1] != '-' && strings.IndexByte(spec.shortValues, name[1]) >= 0:
			opts = append(opts, opt{name: name[:2], value: w.Value[2:], dynamic: w.Dynamic, raw: w.Raw[min(2, len(w.Raw)):], words: []Word{w}})
		default:
			return nil, nil, refuse("%s option %s is not one ncclwiz knows, so it cannot tell where the script starts; set CUDA_VISIBLE_DEVICES and one process by hand", launcher, name)
		}
	}
	return nil, nil, refuse("%s: no script to run", launcher)
}

func find(opts []opt, names ...string) int {
	for i, o := range opts {
		for _, n := range names {
			if o.canon() == canon(n) {
				return i
			}
		}
	}
	return -1
}

func flatten(opts []opt) []Word {
	var out []Word
	for _, o := range opts {
		out = append(out, o.words...)
	}
	return out
}

// set returns an option word NAME=value, keeping the user's spelling of NAME.
func set(name, value string) opt {
	s := name + "=" + value
	return opt{name: name, value: value, words: []Word{{Raw: Quote(s), Value: s}}}
}

var torchrunSpec = optSpec{
	values: names("--nnodes", "--nproc_per_node", "--rdzv_backend", "--rdzv_endpoint", "--rdzv_id", "--rdzv_conf",
		"--max_restarts", "--monitor_interval", "--start_method", "--event_log_handler", "--role", "--log_dir",
		"-r", "--redirects", "-t", "--tee", "--local_ranks_filter", "--node_rank", "--master_addr", "--master_port",
		"--local_addr", "--logs_specs", "--numa_binding", "--signals_to_handle"),
	flags:       names("--standalone", "-m", "--module", "--no_python", "--run_path", "--use_env", "--virtual_local_rank"),
	shortValues: "rt",
}

// torchrun rewrites torchrun and python -m torch.distributed.run/launch.
func (j *job) torchrun(head, args []Word) ([]Word, error) {
	opts, script, err := parseOpts(args, torchrunSpec, j.res.Launcher)
	if err != nil {
		return nil, err
	}
	if i := find(opts, "--nnodes"); i >= 0 {
		o := opts[i]
		if n, ok := nodeCount(o.value); ok && !o.dynamic && n == 1 {
			j.res.Nodes = 1
		} else {
			if n, ok := nodeCount(o.value); ok && !o.dynamic {
				j.res.Nodes = n
			}
			var kept []opt
			for _, o := range opts {
				switch o.canon() {
				case "nnodes", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "node_rank", "master_addr", "master_port", "local_addr", "standalone":
					continue
				}
				kept = append(kept, o)
			}
			opts = append(kept, opt{name: "--standalone", words: []Word{{Raw: "--standalone", Value: "--standalone"}}})
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s → one node: --standalone (a local rendezvous; the --rdzv_*, --node_rank and --master_* options are dropped)", o.name, o.value))
		}
	} else {
		j.res.Nodes = 1
	}
	if i := find(opts, "--nproc_per_node"); i >= 0 {
		o := opts[i]
		switch n, err := strconv.Atoi(o.value); {
		case o.dynamic:
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s → 1", o.name, o.raw))
			opts[i] = set(o.name, "1")
		case err == nil:
			j.res.Processes = n
			if n == 1 {
				break // already one process: the option stays as written
			}
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %d → 1", o.name, n))
			opts[i] = set(o.name, "1")
		case o.value == "gpu" || o.value == "auto":
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s (one process per visible GPU) → 1", o.name, o.value))
			opts[i] = set(o.name, "1")
		case o.value == "cpu":
			return nil, refuse("%s cpu starts CPU processes, not a GPU job", o.name)
		default:
			return nil, refuse("%s %q is not a number of processes", o.name, o.value)
		}
	} else {
		j.res.Processes = 1 // torchrun's default
		opts = append(opts, set("--nproc_per_node", "1"))
		j.res.Changes = append(j.res.Changes, "--nproc_per_node=1 added (torchrun's default, made explicit)")
	}
	j.scanScriptArgs(script)
	return concat(head, flatten(opts), script), nil
}

// nodeCount reads torchrun's --nnodes N or MIN:MAX (the maximum counts).
func nodeCount(v string) (int, bool) {
	if lo, hi, ok := strings.Cut(v, ":"); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return max(a, b), true
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// accelerateSpec lists accelerate launch's options (accelerate
// src/accelerate/commands/launch.py, launch_command_parser).
var accelerateSpec = optSpec{
	values: names("--config_file", "--mixed_precision", "--num_processes", "--num_machines", "--num_cpu_threads_per_process",
		"--dynamo_backend", "--dynamo_mode", "--gpu_ids", "--machine_rank", "--main_process_ip", "--main_process_port",
		"-t", "--tee", "--log_dir", "--role", "--rdzv_backend", "--rdzv_conf", "--max_restarts", "--monitor_interval",
		"--vm", "--env", "--main_training_function", "--deepspeed_config_file", "--zero_stage", "--offload_optimizer_device",
		"--offload_param_device", "--offload_optimizer_nvme_path", "--offload_param_nvme_path", "--gradient_accumulation_steps",
		"--gradient_clipping", "--zero3_init_flag", "--zero3_save_16bit_model", "--deepspeed_hostfile",
		"--deepspeed_exclusion_filter", "--deepspeed_inclusion_filter", "--deepspeed_multinode_launcher",
		"--deepspeed_moe_layer_cls_names", "--fsdp_offload_params", "--fsdp_min_num_params", "--fsdp_sharding_strategy",
		"--fsdp_auto_wrap_policy", "--fsdp_transformer_layer_cls_to_wrap", "--fsdp_backward_prefetch", "--fsdp_state_dict_type",
		"--fsdp_forward_prefetch", "--fsdp_use_orig_params", "--fsdp_cpu_ram_efficient_loading", "--fsdp_sync_module_states",
		"--fsdp_activation_checkpointing", "--fsdp_version", "--fsdp_reshard_after_forward", "--megatron_lm_tp_degree",
		"--megatron_lm_pp_degree", "--megatron_lm_num_micro_batches", "--megatron_lm_sequence_parallelism",
		"--megatron_lm_recompute_activations", "--megatron_lm_use_distributed_optimizer", "--megatron_lm_gradient_clipping",
		"--fp8_backend", "--fp8_margin", "--fp8_interval", "--fp8_format", "--fp8_amax_history_len", "--fp8_amax_compute_algo",
		"--fp8_override_linear_precision", "--fp8_opt_level", "--aws_access_key_id", "--aws_secret_access_key",
		"--mpirun_hostfile", "--mpirun_ccl"),
	flags: names("-q", "--quiet", "--cpu", "--multi_gpu", "--tpu", "--ipex", "--enable_cpu_affinity", "--dynamo_use_fullgraph",
		"--dynamo_use_dynamic", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--use_xpu", "--same_network",
		"-m", "--module", "--no_python", "--tpu_cluster", "--no_tpu_cluster", "--tpu_use_sudo", "--downcast_bf16",
		"--fp8_use_autocast_during_eval", "--debug"),
	shortValues: "t",
}

// accelerate rewrites accelerate launch. It drops --multi_gpu (accelerate
// refuses it with fewer than two processes) and --gpu_ids (one id with a
// multi-GPU config is refused too; CUDA_VISIBLE_DEVICES selects the GPU)
// and sets --num_processes=1, which overrides the config file.
func (j *job) accelerate(head, args []Word) ([]Word, error) {
	opts, script, err := parseOpts(args, accelerateSpec, "accelerate launch")
	if err != nil {
		return nil, err
	}
	if find(opts, "--cpu") >= 0 {
		return nil, refuse("accelerate launch --cpu runs on CPUs; there is no GPU job to move to one GPU")
	}
	cfg := j.accelerateConfig(opts)
	multiNode := false
	if i := find(opts, "--num_machines"); i >= 0 {
		if n, err := strconv.Atoi(opts[i].value); err == nil && !opts[i].dynamic {
			j.res.Nodes = n
			multiNode = n > 1
		} else {
			multiNode = true
		}
	} else if cfg.numMachines > 0 {
		j.res.Nodes = cfg.numMachines
		multiNode = cfg.numMachines > 1
	}
	var kept []opt
	procsSet := false
	for _, o := range opts {
		switch o.canon() {
		case "multi_gpu":
			j.res.Changes = append(j.res.Changes, "--multi_gpu removed (accelerate refuses it with fewer than two processes)")
			continue
		case "gpu_ids":
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s removed (CUDA_VISIBLE_DEVICES selects the GPU)", o.name, o.value))
			continue
		case "num_processes":
			if n, err := strconv.Atoi(o.value); err == nil && !o.dynamic {
				j.res.Processes = n
			}
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s → 1", o.name, o.raw))
			kept = append(kept, set(o.name, "1"))
			procsSet = true
			continue
		case "num_machines":
			if multiNode {
				j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s → 1", o.name, o.value))
			}
			kept = append(kept, set(o.name, "1"))
			continue
		case "machine_rank", "main_process_ip", "main_process_port", "same_network", "rdzv_backend", "rdzv_conf",
			"deepspeed_hostfile", "deepspeed_inclusion_filter", "deepspeed_exclusion_filter", "deepspeed_multinode_launcher":
			if multiNode {
				j.res.Changes = append(j.res.Changes, o.name+" removed (one machine)")
				continue
			}
		}
		kept = append(kept, o)
	}
	if !procsSet {
		kept = append([]opt{set("--num_processes", "1")}, kept...)
		switch {
		case cfg.numProcesses > 0:
			j.res.Processes = cfg.numProcesses
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("--num_processes=1 added (overrides num_processes: %d from %s)", cfg.numProcesses, cfg.name))
		default:
			j.res.Changes = append(j.res.Changes, "--num_processes=1 added (without it accelerate uses the config's count or one process per GPU)")
		}
	}
	if (multiNode || cfg.numMachines > 1) && find(opts, "--num_machines") < 0 {
		kept = append(kept, set("--num_machines", "1"))
		j.res.Changes = append(j.res.Changes, fmt.Sprintf("--num_machines=1 added (overrides num_machines: %d from %s)", cfg.numMachines, cfg.name))
	}
	j.res.Notes = append(j.res.Notes, cfg.notes...)
	if cfg.gas > 0 {
		j.gas = gasInfo{value: cfg.gas, where: "gradient_accumulation_steps in " + cfg.name}
	}
	if i := find(opts, "--gradient_accumulation_steps"); i >= 0 {
		if n, err := strconv.Atoi(opts[i].value); err == nil && !opts[i].dynamic {
			j.gas = gasInfo{value: n, where: "accelerate's " + opts[i].name}
		}
	}
	if i := find(opts, "--deepspeed_config_file"); i >= 0 && !opts[i].dynamic {
		j.deepspeedJSON(opts[i].value)
	}
	j.scanScriptArgs(script)
	return concat(head, flatten(kept), script), nil
}

// deepspeedSpec lists the deepspeed runner's options (deepspeed
// launcher/runner.py, parse_args).
var deepspeedSpec = optSpec{
	values: names("-H", "--hostfile", "-i", "--include", "-e", "--exclude", "--num_nodes", "--min_elastic_nodes", "--max_elastic_nodes",
		"--num_gpus", "--num_accelerators", "--master_port", "--master_addr", "--launcher", "--launcher_args",
		"--enable_each_rank_log", "--autotuning", "--bind_core_list", "--ssh_port", "--node_rank", "--comment"),
	flags: names("--module", "--no_python", "--no_local_rank", "--no_ssh", "--no_ssh_check", "--force_multi", "--save_pid",
		"--elastic_training", "--bind_cores_to_rank"),
	shortValues: "Hie",
}

// deepspeed rewrites the deepspeed runner. It ignores CUDA_VISIBLE_DEVICES
// as soon as --include/--exclude/--num_gpus/--num_nodes is given (and
// refuses --include together with --num_gpus), so the GPU is chosen with
// --include localhost:G alone (deepspeed launcher/runner.py, main()).
func (j *job) deepspeed(head, args []Word) ([]Word, error) {
	opts, script, err := parseOpts(args, deepspeedSpec, "deepspeed")
	if err != nil {
		return nil, err
	}
	j.noCVD = true
	if _, err := strconv.Atoi(j.gpu); err != nil {
		return nil, refuse("deepspeed selects GPUs by index (--include localhost:N), and the GPU here is %q (from %s); pass --gpu N", j.gpu, j.gpuFrom)
	}
	var kept []opt
	hostfile := false
	for _, o := range opts {
		switch o.canon() {
		case "num_gpus", "num_accelerators":
			if n, err := strconv.Atoi(o.value); err == nil && !o.dynamic && n > 0 {
				j.res.Processes = n
			}
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s removed", o.name, o.value))
			continue
		case "include", "i":
			if n := includeSlots(o.value); n > 0 && !o.dynamic {
				j.res.Processes = n
			}
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s removed", o.name, o.value))
			continue
		case "num_nodes":
			if n, err := strconv.Atoi(o.value); err == nil && !o.dynamic && n > 0 {
				j.res.Nodes = n
			}
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s removed (one node)", o.name, o.value))
			continue
		case "hostfile", "H":
			hostfile = true
			j.res.Changes = append(j.res.Changes, fmt.Sprintf("%s %s replaced by --hostfile=/dev/null (not a regular file, so DeepSpeed uses this machine's GPUs)", o.name, o.value))
			continue
		case "exclude", "e", "min_elastic_nodes", "max_elastic_nodes", "master_addr", "launcher", "launcher_args",
			"force_multi", "elastic_training", "no_ssh", "no_ssh_check", "ssh_port", "node_rank":
			j.res.Changes = append(j.res.Changes, o.name+" removed (local single-GPU run)")
			continue
		}
		kept = append(kept, o)
	}
	inc := set("--include", "localhost:"+j.gpu)
	kept = append([]opt{inc}, kept...)
	if hostfile {
		kept = append(kept, set("--hostfile", "/dev/null"))
	}
	j.res.Changes = append([]string{fmt.Sprintf("runs on GPU %s only: --include localhost:%s (GPU from %s; DeepSpeed ignores CUDA_VISIBLE_DEVICES once --include is given, and counts GPUs by their index on the machine)", j.gpu, j.gpu, j.gpuFrom)}, j.res.Changes...)
	if j.res.Nodes == 0 {
		j.res.Nodes = 1
	}
	j.res.Notes = append(j.res.Notes, "DeepSpeed ZeRO splits optimizer state (and with stage 3 the parameters) across ranks; on one GPU all of it lives there, so memory use rises. Lower the micro batch or enable CPU offload if it no longer fits.")
	j.scanScriptArgs(script)
	return concat(head, flatten(kept), script), nil
}

// includeSlots counts the GPUs of a deepspeed --include localhost:0,1,2.
func includeSlots(v string) int {
	if strings.Contains(v, "@") {
		return 0
	}
	_, slots, ok := strings.Cut(v, ":")
	if !ok {
		return 0
	}
	return len(strings.Split(slots, ","))
}

func concat(parts ...[]Word) []Word {
	var out []Word
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
