package launch

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// files stands in for the user's working directory.
var files = map[string]string{
	"fsdp.yaml": "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 4\nnum_machines: 1\ngpu_ids: all\n",
	"pinned.yaml": "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\ngpu_ids: 2,3\n" +
		"deepspeed_config:\n  gradient_accumulation_steps: 4\n",
	"two_nodes.yaml": "distributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 2\nmachine_rank: 0\n",
	"ds_all.json":    `{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 2}}`,
	"ds_tm.json":     `{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4}`,
	"ds_mg.json":     `{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}`,
	"ds_auto.json":   `{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"}`,
	"home/.cache/huggingface/accelerate/default_config.yaml": "distributed_type: MULTI_GPU\nnum_processes: 8\n",
}

func readFixture(name string) ([]byte, error) {
	if s, ok := files[name]; ok {
		return []byte(s), nil
	}
	return nil, os.ErrNotExist
}

func TestRewrite(t *testing.T) {
	tests := []struct {
		name, in, want string
		opt            Options
		procs          int
		changes, notes []string
	}{
		{
			name:    "seed accelerate line",
			in:      `accelerate launch --multi_gpu --num_processes 2 ./train_low_mem.py train --is_finetune=True`,
			want:    `CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 ./train_low_mem.py train --is_finetune=True`,
			procs:   2,
			changes: []string{"--multi_gpu removed", "--num_processes 2 → 1", "CUDA_VISIBLE_DEVICES=0"},
			notes:   []string{"ran 2 processes", "multiply gradient accumulation by 2"},
		},
		{
			name:    "torchrun keeps quoting",
			in:      `torchrun --nproc_per_node=8 train.py --config "configs/llama 7b.yaml" --lr 3e-4 --tag 'a b'"c"`,
			want:    `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py --config "configs/llama 7b.yaml" --lr 3e-4 --tag 'a b'"c"`,
			procs:   8,
			changes: []string{"--nproc_per_node 8 → 1"},
		},
		{
			name:    "torchrun multi-node goes standalone",
			in:      `torchrun --nnodes=2 --nproc-per-node 8 --rdzv_backend=c10d --rdzv_endpoint=node0:29500 --rdzv_id=42 train.py --gradient_accumulation_steps 4`,
			want:    `CUDA_VISIBLE_DEVICES=0 torchrun --nproc-per-node=1 --standalone train.py --gradient_accumulation_steps 4`,
			procs:   8,
			changes: []string{"--nnodes 2 → one node: --standalone"},
			notes:   []string{"8 processes on each of 2 nodes (16 in all)", "raise the script's --gradient_accumulation_steps from 4 to 64"},
		},
		{
			name:    "python -m torch.distributed.run with env",
			in:      `NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=2,3 python -m torch.distributed.run --nproc_per_node 2 -m my.pkg.train --name 'run $1'`,
			want:    `CUDA_VISIBLE_DEVICES=2 NCCL_DEBUG=INFO python -m torch.distributed.run --nproc_per_node=1 -m my.pkg.train --name 'run $1'`,
			procs:   2,
			changes: []string{"GPU from the first of CUDA_VISIBLE_DEVICES=2,3"},
		},
		{
			name:  "python -u -m torch.distributed.launch --use_env",
			in:    `/opt/conda/bin/python3 -u -m torch.distributed.launch --use_env --nproc_per_node=4 --master_port=29501 train.py`,
			want:  `CUDA_VISIBLE_DEVICES=0 /opt/conda/bin/python3 -u -m torch.distributed.launch --use_env --nproc_per_node=1 --master_port=29501 train.py`,
			procs: 4,
		},
		{
			name:    "deepspeed picks the GPU with --include",
			in:      `deepspeed --num_gpus 8 train.py --deepspeed ds_config.json`,
			want:    `deepspeed --include=localhost:0 train.py --deepspeed ds_config.json`,
			procs:   8,
			changes: []string{"--include localhost:0", "ignores CUDA_VISIBLE_DEVICES", "--num_gpus 8 removed"},
			notes:   []string{"ZeRO", "Check ds_config.json too"},
		},
		{
			name:    "deepspeed include list and hostfile",
			in:      `CUDA_VISIBLE_DEVICES=1 deepspeed -H hosts.txt --include localhost:0,1,2,3 --master_port 29600 train.py --deepspeed_config ds_all.json`,
			opt:     Options{ReadFile: readFixture},
			want:    `deepspeed --include=localhost:1 --master_port 29600 --hostfile=/dev/null train.py --deepspeed_config ds_all.json`,
			procs:   4,
			changes: []string{"-H hosts.txt replaced by --hostfile=/dev/null", "--include localhost:0,1,2,3 removed"},
			notes:   []string{"set gradient_accumulation_steps to 16 (keeps the global batch of 64)"},
		},
		{
			name:  "deepspeed json with tbs and micro",
			in:    `deepspeed --num_gpus=4 train.py --deepspeed ds_tm.json`,
			opt:   Options{ReadFile: readFixture},
			want:  `deepspeed --include=localhost:0 train.py --deepspeed ds_tm.json`,
			procs: 4,
			notes: []string{"derives accumulation = 16 on one GPU: the global batch stays 64"},
		},
		{
			name:  "deepspeed json with micro and gas",
			in:    `deepspeed --num_gpus=4 train.py --deepspeed ds_mg.json`,
			opt:   Options{ReadFile: readFixture},
			want:  `deepspeed --include=localhost:0 train.py --deepspeed ds_mg.json`,
			procs: 4,
			notes: []string{"shrinks from 32 to 8; set gradient_accumulation_steps to 8"},
		},
		{
			name:  "plain python",
			in:    `python train.py --batch_size 32`,
			want:  `CUDA_VISIBLE_DEVICES=0 python train.py --batch_size 32`,
			procs: 1,
			notes: []string{"already ran a single process", "torch.multiprocessing.spawn"},
		},
		{
			name:  "accelerate config file is read",
			in:    `accelerate launch --config_file fsdp.yaml train.py`,
			opt:   Options{ReadFile: readFixture},
			want:  `CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 --config_file fsdp.yaml train.py`,
			procs: 4,
			notes: []string{"distributed_type: FSDP", "ran 4 processes"},
		},
		{
			name:    "accelerate config pins gpu_ids",
			in:      `accelerate launch --config_file pinned.yaml train.py`,
			opt:     Options{ReadFile: readFixture},
			want:    `CUDA_VISIBLE_DEVICES=2 accelerate launch --num_processes=1 --config_file pinned.yaml train.py`,
			procs:   2,
			changes: []string{"GPU from gpu_ids in pinned.yaml"},
			notes:   []string{"pins gpu_ids: 2,3", "raise gradient_accumulation_steps in pinned.yaml from 4 to 8"},
		},
		{
			name:    "accelerate two-machine config gets --num_machines=1",
			in:      `accelerate launch --config_file two_nodes.yaml --machine_rank 0 train.py`,
			opt:     Options{ReadFile: readFixture},
			want:    `CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 --config_file two_nodes.yaml --num_machines=1 train.py`,
			procs:   16,
			changes: []string{"--machine_rank removed", "--num_machines=1 added"},
		},
		{
			name:  "accelerate default config",
			in:    `accelerate launch train.py`,
			opt:   Options{ReadFile: readFixture, AccelerateDefaultConfig: "home/.cache/huggingface/accelerate/default_config.yaml"},
			want:  `CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 train.py`,
			procs: 8,
			notes: []string{"reads its default config"},
		},
		{
			name:    "torchrun one per GPU",
			in:      `torchrun --standalone --nproc_per_node=gpu train.py`,
			want:    `CUDA_VISIBLE_DEVICES=0 torchrun --standalone --nproc_per_node=1 train.py`,
			changes: []string{"gpu (one process per visible GPU) → 1"},
			notes:   []string{"one process per GPU (how many is only known on the machine)"},
		},
		{
			name: "line continuations",
			in:   "torchrun \\\n  --nproc_per_node=4 \\\n  train.py \\\n  --out /tmp/x\n",
			want: `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py --out /tmp/x`,
		},
		{
			name:    "variables in script arguments stay as written",
			in:      `torchrun --nproc_per_node=$NGPU train.py --output_dir "$OUT/run-${RUN_ID}" --data ~/data/*.jsonl`,
			want:    `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py --output_dir "$OUT/run-${RUN_ID}" --data ~/data/*.jsonl`,
			changes: []string{"--nproc_per_node $NGPU → 1"},
		},
		{
			name: "env and nohup wrappers",
			in:   `env NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=5 nohup torchrun --nproc_per_node 2 train.py`,
			want: `CUDA_VISIBLE_DEVICES=5 env NCCL_DEBUG=INFO nohup torchrun --nproc_per_node=1 train.py`,
		},
		{
			name:  "megatron global batch",
			in:    `torchrun --nproc_per_node 8 pretrain_gpt.py --micro-batch-size 4 --global-batch-size 256`,
			want:  `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 pretrain_gpt.py --micro-batch-size 4 --global-batch-size 256`,
			notes: []string{"global batch (--global-batch-size)", "8× as long"},
		},
		{
			name: "accelerate-launch entry point and --gpu",
			in:   `accelerate-launch --num_processes=4 --gpu_ids 0,1,2,3 --mixed_precision bf16 train.py`,
			opt:  Options{GPU: "3"},
			want: `CUDA_VISIBLE_DEVICES=3 accelerate-launch --num_processes=1 --mixed_precision bf16 train.py`,
		},
		{
			name: "single process stays",
			in:   `torchrun --nproc_per_node 1 train.py`,
			want: `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node 1 train.py`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			words, err := Tokenize(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Rewrite(words, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if r.Command != tt.want {
				t.Errorf("got  %s\nwant %s", r.Command, tt.want)
			}
			if tt.procs != 0 && r.Processes != tt.procs {
				t.Errorf("processes = %d, want %d", r.Processes, tt.procs)
			}
			all := strings.Join(r.Changes, "\n")
			for _, c := range tt.changes {
				if !strings.Contains(all, c) {
					t.Errorf("changes lack %q:\n%s", c, all)
				}
			}
			notes := strings.Join(r.Notes, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes lack %q:\n%s", n, notes)
				}
			}
			if !strings.HasSuffix(r.Command, r.Script) || r.Script == "" {
				t.Errorf("script %q is not the tail of %q", r.Script, r.Command)
			}
		})
	}
}

func TestExplainsWhatItCannotRewrite(t *testing.T) {
	for _, tt := range []struct{ in, why string }{
		{`torchrun --nproc_per_node=8 train.py | tee log`, "pipe"},
		{`cd /x && torchrun train.py`, "&& list"},
		{`torchrun train.py; echo done`, "command list"},
		{`torchrun train.py > log 2>&1`, "redirection"},
		{`torchrun --nproc_per_node=$(nvidia-smi -L | wc -l) train.py`, "command substitution"},
		{"torchrun --nproc_per_node=`nproc` train.py", "command substitution"},
		{`$LAUNCHER train.py`, "expands at run time"},
		{`torchrun $DIST_ARGS train.py`, "cannot tell whether it holds launcher options"},
		{`torchrun --nproc_per_node=${N:-8} train.py`, "parameter expansion"},
		{`srun torchrun train.py`, "across hosts"},
		{`bash run.sh`, "rewrite the torchrun"},
		{`torchrun --some-new-flag 3 train.py`, "not one ncclwiz knows"},
		{`torchrun --nproc_per_node=cpu train.py`, "CPU processes"},
		{`torchrun "unbalanced`, "not closed"},
		{"torchrun train.py\nrm -rf /tmp/x", "several lines"},
		{`accelerate config`, "another accelerate command"},
		{`accelerate launch --cpu train.py`, "CPUs"},
		{`python -c 'import torch'`, "inline code"},
		{`python`, "interactive"},
		{`torchrun`, "no script"},
		{`env -i torchrun train.py`, "env with options"},
		{`deepspeed --num_gpus 2 train.py`, ""}, // rewritable: control
		{``, "empty"},
	} {
		words, err := Tokenize(tt.in)
		if err == nil {
			_, err = Rewrite(words, Options{})
		}
		switch {
		case tt.why == "" && err != nil:
			t.Errorf("%q: %v", tt.in, err)
		case tt.why != "" && err == nil:
			t.Errorf("%q: rewritten instead of explained", tt.in)
		case tt.why != "" && !strings.Contains(err.Error(), tt.why):
			t.Errorf("%q: explanation %q lacks %q", tt.in, err, tt.why)
		}
	}
	_, err := Rewrite([]Word{{Raw: "srun", Value: "srun"}}, Options{})
	if !errors.Is(err, ErrCannotRewrite) {
		t.Errorf("refusal does not wrap ErrCannotRewrite: %v", err)
	}
	if _, err := Rewrite(FromArgv([]string{"deepspeed", "t.py"}), Options{GPU: "GPU-1234"}); err == nil {
		t.Error("deepspeed accepted a UUID for --include")
	}
}

// Every argument of the rewritten command reaches the program exactly as
// the original's did: bash expands both (variables, globs and all).
func TestArgumentsSurviveTheShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	dir := t.TempDir()
	for _, f := range []string{"a.jsonl", "b.jsonl"} {
		if err := os.WriteFile(dir+"/"+f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	argv := func(line string) string {
		cmd := exec.Command(bash, "-c", "f(){ printf '<%s>' \"$@\"; }; f "+line)
		cmd.Dir = dir
		cmd.Env = []string{"OUT=/o u t", "RUN_ID=7", "HOME=/home/u"}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
		return string(out)
	}
	for _, in := range []string{
		`torchrun --nproc_per_node=8 train.py --name "a b" --glob '*.json' --q 'it'\''s' --empty "" --esc a\ b --dq "x\"y\\z"`,
		`accelerate launch --multi_gpu --num_processes 2 ./train_low_mem.py train --is_finetune=True --out "$OUT/${RUN_ID}" *.jsonl ~/x`,
		`deepspeed --num_gpus 2 t.py --a=$'x' --b "tab	in" --c {1,2}`,
	} {
		words, err := Tokenize(in)
		if err != nil {
			// $'…' is refused: rewrite without it.
			words, err = Tokenize(strings.ReplaceAll(in, `$'x'`, `'x'`))
			if err != nil {
				t.Fatal(err)
			}
		}
		r, err := Rewrite(words, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var script []string
		for i, w := range words {
			if w.Value == "train.py" || w.Value == "./train_low_mem.py" || w.Value == "t.py" {
				for _, s := range words[i:] {
					script = append(script, s.Raw)
				}
				break
			}
		}
		if orig, got := argv(strings.Join(script, " ")), argv(r.Script); orig != got {
			t.Errorf("%s:\narguments changed:\n%s\n%s", in, orig, got)
		}
	}
	r, err := Rewrite(FromArgv([]string{"torchrun", "--nproc_per_node", "4", "train.py", "it's", "$HOME", "a b", ""}), Options{GPU: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `CUDA_VISIBLE_DEVICES=3 torchrun --nproc_per_node=1 train.py 'it'\''s' '$HOME' 'a b' ''`; r.Command != want {
		t.Errorf("argv rewrite:\n%s\n%s", r.Command, want)
	}
	if got := argv(r.Script); got != "<train.py><it's><$HOME><a b><>" {
		t.Errorf("argv round trip: %s", got)
	}
}

func TestTokenize(t *testing.T) {
	for _, tt := range []struct {
		in   string
		vals []string
		dyn  []bool
	}{
		{`a 'b c' "d\"e" f\ g`, []string{"a", "b c", `d"e`, "f g"}, []bool{false, false, false, false}},
		{"a \\\n b", []string{"a", "b"}, nil},
		{`x=$HOME "${Y}z" '$lit' *.py`, []string{"x=$HOME", "${Y}z", "$lit", "*.py"}, []bool{true, true, false, true}},
		{`a # comment`, []string{"a"}, nil},
		{`a#b c`, []string{"a#b", "c"}, nil},
		{"\"multi\nline\"", []string{"multi\nline"}, nil},
		{`tail$`, []string{"tail$"}, nil},
	} {
		ws, err := Tokenize(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		var vals []string
		for i, w := range ws {
			vals = append(vals, w.Value)
			if tt.dyn != nil && w.Dynamic != tt.dyn[i] {
				t.Errorf("%q word %d dynamic = %v", tt.in, i, w.Dynamic)
			}
		}
		if strings.Join(vals, "|") != strings.Join(tt.vals, "|") {
			t.Errorf("%q: %q, want %q", tt.in, vals, tt.vals)
		}
	}
}

// FuzzRewrite: whatever the input, the tokenizer and rewriter never panic,
// a rewrite is a simple command ncclwiz can parse again, keeps the script
// part verbatim, selects one GPU, and rewriting it again changes nothing.
func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		`accelerate launch --multi_gpu --num_processes 2 ./train_low_mem.py train --is_finetune=True`,
		`torchrun --nnodes=2 --nproc_per_node=8 a.py "q" 'r s' $X`,
		`deepspeed --num_gpus 2 --hostfile h t.py --deepspeed ds.json`,
		`CUDA_VISIBLE_DEVICES=1,2 python -m torch.distributed.run --nproc_per_node 2 t.py`,
		"python -u t.py \\\n --x 1",
		`env A=1 nohup accelerate launch --config_file c.yaml --num_machines 2 t.py`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Tokenize(s)
		if err != nil {
			return
		}
		r, err := Rewrite(words, Options{})
		if err != nil {
			if !errors.Is(err, ErrCannotRewrite) {
				t.Fatalf("%q: error without explanation: %v", s, err)
			}
			return
		}
		if !strings.HasPrefix(r.Command, "CUDA_VISIBLE_DEVICES=") && !strings.Contains(r.Command, "--include=localhost:") {
			t.Fatalf("rewrite of %q selects no GPU: %q", s, r.Command)
		}
		if !strings.HasSuffix(r.Command, r.Script) {
			t.Fatalf("rewrite of %q does not end with its script %q: %q", s, r.Script, r.Command)
		}
		again, err := Tokenize(r.Command)
		if err != nil {
			t.Fatalf("rewrite of %q is not re-parsable: %q: %v", s, r.Command, err)
		}
		r2, err := Rewrite(again, Options{})
		if err != nil {
			t.Fatalf("rewrite of %q cannot be rewritten again: %q: %v", s, r.Command, err)
		}
		if r2.Command != r.Command {
			t.Fatalf("rewrite is not a fixed point:\n%q\n%q\n%q", s, r.Command, r2.Command)
		}
	})
}

// TestQuoteLeadingEquals: zsh expands an unquoted leading = (=eth0 runs a
// lookup of the command eth0), so a rewritten command quotes it; the
// rewriter shares internal/shellquote's quoter.
func TestQuoteLeadingEquals(t *testing.T) {
	words := FromArgv([]string{"torchrun", "--nproc_per_node", "8", "train.py", "--tag", "=eth0", "a^b"})
	var raw []string
	for _, w := range words {
		raw = append(raw, w.Raw)
	}
	got := strings.Join(raw, " ")
	if !strings.Contains(got, "'=eth0'") || !strings.Contains(got, "'a^b'") {
		t.Fatalf("quoted for display: %s", got)
	}
}
