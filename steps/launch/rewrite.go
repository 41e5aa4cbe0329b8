package launch

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Result is a rewritten command.
type Result struct {
	// Command is the new command line, ready to paste.
	Command string
	// Launcher names what was recognised (torchrun, accelerate, deepspeed, python).
	Launcher string
	// Processes is how many processes the original command started per node
	// (0 when it could not be told).
	Processes int
	// Changes lists what was changed, one line each.
	Changes []string
	// Notes explain consequences (batch size, config files) to check.
	Notes []string
}

// Options tune the rewrite.
type Options struct {
	// GPU is the device index to run on (default 0).
	GPU string
}

// Rewrite turns words into a one-GPU command.
func Rewrite(words []Word, opt Options) (Result, error) {
	gpu := opt.GPU
	if gpu == "" {
		gpu = "0"
	}
	// Leading NAME=value assignments stay, except CUDA_VISIBLE_DEVICES.
	var env []Word
	i := 0
	for ; i < len(words) && isAssignment(words[i].Value); i++ {
		name, val, _ := strings.Cut(words[i].Value, "=")
		if name == "CUDA_VISIBLE_DEVICES" {
			if opt.GPU == "" {
				if first, _, _ := strings.Cut(val, ","); strings.TrimSpace(first) != "" {
					gpu = strings.TrimSpace(first)
				}
			}
			continue
		}
		env = append(env, words[i])
	}
	rest := words[i:]
	if len(rest) == 0 {
		return Result{}, fmt.Errorf("no command after the environment assignments")
	}
	var r Result
	var out []Word
	var err error
	prog := path.Base(rest[0].Value)
	switch {
	case prog == "env":
		return Result{}, fmt.Errorf("remove the leading `env` and pass the command itself")
	case prog == "torchrun":
		r.Launcher = "torchrun"
		out, err = rewriteTorchrun(rest[:1], rest[1:], &r)
	case isPython(prog) && len(rest) >= 3 && rest[1].Value == "-m" && (rest[2].Value == "torch.distributed.run" || rest[2].Value == "torch.distributed.launch"):
		r.Launcher = "python -m " + rest[2].Value
		out, err = rewriteTorchrun(rest[:3], rest[3:], &r)
	case prog == "accelerate" && len(rest) >= 2 && rest[1].Value == "launch":
		r.Launcher = "accelerate launch"
		out, err = rewriteAccelerate(rest[:2], rest[2:], &r)
	case prog == "accelerate-launch":
		r.Launcher = "accelerate launch"
		out, err = rewriteAccelerate(rest[:1], rest[1:], &r)
	case prog == "deepspeed":
		r.Launcher = "deepspeed"
		out, err = rewriteDeepspeed(rest[:1], rest[1:], &r)
	case isPython(prog):
		r.Launcher = "python"
		out = rest
		r.Notes = append(r.Notes, "A plain python command starts one process; with CUDA_VISIBLE_DEVICES it sees one GPU. If the script spawns one worker per GPU (torch.multiprocessing.spawn with torch.cuda.device_count()), it now spawns one.")
	case prog == "mpirun" || prog == "srun" || prog == "mpiexec":
		return Result{}, fmt.Errorf("%s starts processes on several hosts; run the inner command (torchrun/python …) on this machine instead and rewrite that", prog)
	default:
		return Result{}, fmt.Errorf("%q is not a launcher ncclwiz knows (torchrun, python -m torch.distributed.run/launch, accelerate launch, deepspeed, python); set CUDA_VISIBLE_DEVICES=%s and make it start one process", rest[0].Value, gpu)
	}
	if err != nil {
		return Result{}, err
	}
	r.Changes = append([]string{"runs on GPU " + gpu + " only (CUDA_VISIBLE_DEVICES=" + gpu + ")"}, r.Changes...)
	final := append([]Word{{Raw: "CUDA_VISIBLE_DEVICES=" + Quote(gpu), Value: "CUDA_VISIBLE_DEVICES=" + gpu}}, env...)
	final = append(final, out...)
	raws := make([]string, len(final))
	for j, w := range final {
		raws[j] = w.Raw
	}
	r.Command = strings.Join(raws, " ")
	r.Notes = append(r.Notes, batchNotes(out, r.Processes)...)
	return r, nil
}

func isPython(p string) bool {
	return p == "python" || p == "python3" || strings.HasPrefix(p, "python3.")
}

func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// optSpec says how a launcher's options are parsed: which take a value,
// which are flags. Everything else before the script is refused.
type optSpec struct {
	values map[string]bool
	flags  map[string]bool
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
		m[strings.ReplaceAll(n, "_", "-")] = true
		m[strings.ReplaceAll(n, "-", "_")] = true
	}
	return m
}

// opt is one parsed launcher option.
type opt struct {
	name  string
	value string
	words []Word // the original words (1 or 2)
}

// splitLauncher splits launcher options from the script and its arguments.
func splitLauncher(args []Word, spec optSpec, launcher string) ([]opt, []Word, error) {
	var opts []opt
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !strings.HasPrefix(w.Value, "-") || w.Value == "-" {
			return opts, args[i:], nil
		}
		if w.Value == "--" {
			return opts, args[i+1:], nil
		}
		name, val, hasEq := strings.Cut(w.Value, "=")
		switch {
		case spec.flags[name]:
			opts = append(opts, opt{name: name, words: []Word{w}})
		case spec.values[name] && hasEq:
			opts = append(opts, opt{name: name, value: val, words: []Word{w}})
		case spec.values[name]:
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("%s: %s needs a value", launcher, name)
			}
			opts = append(opts, opt{name: name, value: args[i+1].Value, words: []Word{w, args[i+1]}})
			i++
		default:
			return nil, nil, fmt.Errorf("%s option %s is not one ncclwiz knows, so it cannot tell where the script starts; rewrite by hand: set CUDA_VISIBLE_DEVICES and one process", launcher, name)
		}
	}
	return opts, nil, fmt.Errorf("%s: no script to run", launcher)
}

func canon(name string) string { return strings.ReplaceAll(strings.TrimLeft(name, "-"), "-", "_") }

func findOpt(opts []opt, names ...string) int {
	for i, o := range opts {
		for _, n := range names {
			if canon(o.name) == canon(n) {
				return i
			}
		}
	}
	return -1
}

func optWords(opts []opt) []Word {
	var out []Word
	for _, o := range opts {
		out = append(out, o.words...)
	}
	return out
}

var torchrunSpec = optSpec{
	values: set("--nnodes", "--nproc_per_node", "--rdzv_backend", "--rdzv_endpoint", "--rdzv_id", "--rdzv_conf", "--max_restarts",
		"--monitor_interval", "--start_method", "--role", "--log_dir", "-r", "--redirects", "-t", "--tee", "--local_addr", "--node_rank",
		"--master_addr", "--master_port", "--local_ranks_filter", "--logs_specs", "--local-ranks-filter", "--event-log-handler", "--numa-binding"),
	flags: set("--standalone", "-m", "--module", "--no_python", "--run_path", "--use_env", "--use-env", "--virtual-local-rank"),
}

func rewriteTorchrun(head, args []Word, r *Result) ([]Word, error) {
	opts, script, err := splitLauncher(args, torchrunSpec, r.Launcher)
	if err != nil {
		return nil, err
	}
	if i := findOpt(opts, "--nproc_per_node"); i >= 0 {
		n, err := strconv.Atoi(opts[i].value)
		if err != nil {
			return nil, fmt.Errorf("--nproc_per_node=%s: ncclwiz only rewrites a number of processes (not gpu/auto); use --nproc_per_node=1", opts[i].value)
		}
		r.Processes = n
		opts[i] = opt{name: "--nproc_per_node", value: "1", words: []Word{{Raw: "--nproc_per_node=1", Value: "--nproc_per_node=1"}}}
		r.Changes = append(r.Changes, fmt.Sprintf("--nproc_per_node %d → 1", n))
	} else {
		r.Processes = 1
	}
	if i := findOpt(opts, "--nnodes"); i >= 0 && opts[i].value != "1" && opts[i].value != "1:1" {
		r.Changes = append(r.Changes, fmt.Sprintf("--nnodes %s → 1, standalone (no rendezvous with other nodes)", opts[i].value))
		var kept []opt
		for _, o := range opts {
			switch canon(o.name) {
			case "nnodes", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "node_rank", "master_addr", "master_port", "standalone":
				continue
			}
			kept = append(kept, o)
		}
		opts = append(kept, opt{name: "--standalone", words: []Word{{Raw: "--standalone", Value: "--standalone"}}})
	}
	if findOpt(opts, "--nproc_per_node") < 0 {
		opts = append(opts, opt{name: "--nproc_per_node", value: "1", words: []Word{{Raw: "--nproc_per_node=1", Value: "--nproc_per_node=1"}}})
	}
	return concat(head, optWords(opts), script), nil
}

var accelerateSpec = optSpec{
	values: set("--config_file", "--num_processes", "--num_machines", "--machine_rank", "--main_process_ip", "--main_process_port",
		"--mixed_precision", "--gpu_ids", "--dynamo_backend", "--dynamo_mode", "--num_cpu_threads_per_process", "--main_training_function",
		"--rdzv_backend", "--max_restarts", "--monitor_interval", "--deepspeed_config_file", "--zero_stage", "--offload_optimizer_device",
		"--offload_param_device", "--gradient_accumulation_steps", "--gradient_clipping", "--deepspeed_hostfile", "--deepspeed_multinode_launcher",
		"--fsdp_sharding_strategy", "--fsdp_auto_wrap_policy", "--fsdp_transformer_layer_cls_to_wrap", "--fsdp_state_dict_type",
		"--fsdp_backward_prefetch", "--fsdp_offload_params", "--fsdp_min_num_params", "--fsdp_version", "--log_dir", "--tee", "--role"),
	flags: set("--multi_gpu", "--cpu", "--tpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "-m", "--module", "--no_python",
		"--debug", "-q", "--quiet", "--same_network", "--downcast_bf16", "--enable_cpu_affinity", "--use_xpu", "--ipex"),
}

func rewriteAccelerate(head, args []Word, r *Result) ([]Word, error) {
	opts, script, err := splitLauncher(args, accelerateSpec, "accelerate launch")
	if err != nil {
		return nil, err
	}
	var kept []opt
	multiNode := false
	if i := findOpt(opts, "--num_machines"); i >= 0 && opts[i].value != "1" {
		multiNode = true
		r.Changes = append(r.Changes, fmt.Sprintf("--num_machines %s → 1", opts[i].value))
	}
	for _, o := range opts {
		switch canon(o.name) {
		case "multi_gpu":
			r.Changes = append(r.Changes, "--multi_gpu removed")
			continue
		case "gpu_ids":
			r.Changes = append(r.Changes, "--gpu_ids "+o.value+" removed (CUDA_VISIBLE_DEVICES selects the GPU)")
			continue
		case "num_processes":
			if n, err := strconv.Atoi(o.value); err == nil {
				r.Processes = n
			}
			r.Changes = append(r.Changes, fmt.Sprintf("--num_processes %s → 1", o.value))
			continue
		case "num_machines", "machine_rank", "main_process_ip", "main_process_port", "same_network", "rdzv_backend":
			if multiNode {
				continue
			}
		case "config_file":
			r.Notes = append(r.Notes, "The config file "+o.value+" stays; command-line flags override its values, so its num_processes and distributed_type no longer apply as written. Check it does not pin gpu_ids to other GPUs.")
		}
		kept = append(kept, o)
	}
	kept = append([]opt{{name: "--num_processes", value: "1", words: []Word{{Raw: "--num_processes=1", Value: "--num_processes=1"}}}}, kept...)
	if findOpt(opts, "--multi_gpu", "--num_processes", "--config_file") < 0 {
		r.Notes = append(r.Notes, "No process count was given: accelerate would have used its default config (~/.cache/huggingface/accelerate/default_config.yaml); --num_processes=1 overrides it.")
	}
	return concat(head, optWords(kept), script), nil
}

var deepspeedSpec = optSpec{
	values: set("--num_gpus", "--num_nodes", "--include", "--exclude", "--hostfile", "-H", "--master_addr", "--master_port", "--launcher",
		"--launcher_args", "--min_elastic_nodes", "--max_elastic_nodes", "--bind_core_list", "--ssh_port", "--autotuning", "--node_rank",
		"--num_accelerators", "--comment"),
	flags: set("--module", "--no_python", "--no_local_rank", "--no_ssh", "--no_ssh_check", "--force_multi", "--save_pid", "--elastic_training",
		"--bind_cores_to_rank", "--enable_each_rank_log"),
}

func rewriteDeepspeed(head, args []Word, r *Result) ([]Word, error) {
	opts, script, err := splitLauncher(args, deepspeedSpec, "deepspeed")
	if err != nil {
		return nil, err
	}
	var kept []opt
	for _, o := range opts {
		switch canon(o.name) {
		case "num_gpus", "num_accelerators":
			if n, err := strconv.Atoi(o.value); err == nil {
				r.Processes = n
			}
			r.Changes = append(r.Changes, fmt.Sprintf("%s %s → 1", o.name, o.value))
			continue
		case "include", "exclude", "hostfile", "H", "num_nodes", "master_addr", "master_port", "launcher", "launcher_args", "force_multi", "node_rank", "no_ssh":
			r.Changes = append(r.Changes, o.name+" removed (local single-GPU run)")
			continue
		}
		kept = append(kept, o)
	}
	kept = append([]opt{{name: "--num_gpus", value: "1", words: []Word{{Raw: "--num_gpus=1", Value: "--num_gpus=1"}}}}, kept...)
	r.Notes = append(r.Notes, "DeepSpeed ZeRO partitions state across ranks; on one GPU every partition lives on that GPU, so memory use rises. Lower the batch size or enable offload if it no longer fits.")
	return concat(head, optWords(kept), script), nil
}

func concat(parts ...[]Word) []Word {
	var out []Word
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// batchNotes explains what happens to the global batch size.
func batchNotes(script []Word, procs int) []string {
	if procs <= 1 {
		return nil
	}
	var notes []string
	gas := ""
	for i, w := range script {
		name, val, eq := strings.Cut(w.Value, "=")
		if canon(name) == "gradient_accumulation_steps" {
			if eq {
				gas = val
			} else if i+1 < len(script) {
				gas = script[i+1].Value
			}
		}
	}
	notes = append(notes, fmt.Sprintf("The job ran %d processes; now 1. The global batch (per-device batch x processes x accumulation) shrinks %dx.", procs, procs))
	if n, err := strconv.Atoi(gas); err == nil {
		notes = append(notes, fmt.Sprintf("To keep the same global batch, raise --gradient_accumulation_steps from %d to %d (ncclwiz does not change script arguments).", n, n*procs))
	} else {
		notes = append(notes, fmt.Sprintf("To keep the same global batch, multiply gradient accumulation by %d (or the per-device batch, if memory allows); the learning-rate schedule then stays comparable.", procs))
	}
	return notes
}
