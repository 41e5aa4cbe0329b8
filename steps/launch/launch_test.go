package launch

import (
	"os/exec"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		changes []string
		notes   []string
	}{
		{
			in:      `accelerate launch --multi_gpu --num_processes 2 ./train_low_mem.py train --is_finetune=True`,
			want:    `CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 ./train_low_mem.py train --is_finetune=True`,
			changes: []string{"--multi_gpu removed", "--num_processes 2 → 1"},
			notes:   []string{"shrinks 2x"},
		},
		{
			in:      `torchrun --nproc_per_node=8 train.py --config "configs/llama 7b.yaml" --lr 3e-4`,
			want:    `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 train.py --config "configs/llama 7b.yaml" --lr 3e-4`,
			changes: []string{"--nproc_per_node 8 → 1"},
		},
		{
			in:    `torchrun --nnodes=2 --nproc-per-node 8 --rdzv_backend=c10d --rdzv_endpoint=node0:29500 --rdzv_id=42 train.py --gradient_accumulation_steps 4`,
			want:  `CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=1 --standalone train.py --gradient_accumulation_steps 4`,
			notes: []string{"raise --gradient_accumulation_steps from 4 to 32"},
		},
		{
			in:   `NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=2,3 python -m torch.distributed.run --nproc_per_node 2 -m my.pkg.train --name 'run $1'`,
			want: `CUDA_VISIBLE_DEVICES=2 NCCL_DEBUG=INFO python -m torch.distributed.run --nproc_per_node=1 -m my.pkg.train --name 'run $1'`,
		},
		{
			in:   `python3 -m torch.distributed.launch --use_env --nproc_per_node=4 train.py`,
			want: `CUDA_VISIBLE_DEVICES=0 python3 -m torch.distributed.launch --use_env --nproc_per_node=1 train.py`,
		},
		{
			in:      `deepspeed --num_gpus 8 --include localhost:0,1,2,3 train.py --deepspeed ds_config.json`,
			want:    `CUDA_VISIBLE_DEVICES=0 deepspeed --num_gpus=1 train.py --deepspeed ds_config.json`,
			changes: []string{"--num_gpus 8 → 1", "--include removed"},
		},
		{
			in:   `python train.py --batch_size 32`,
			want: `CUDA_VISIBLE_DEVICES=0 python train.py --batch_size 32`,
		},
		{
			in:    `accelerate launch --config_file fsdp.yaml train.py`,
			want:  `CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes=1 --config_file fsdp.yaml train.py`,
			notes: []string{"The config file fsdp.yaml stays"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			words, err := Tokenize(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Rewrite(words, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Command != tt.want {
				t.Errorf("got  %s\nwant %s", r.Command, tt.want)
			}
			all := strings.Join(r.Changes, "\n")
			for _, c := range tt.changes {
				if !strings.Contains(all, c) {
					t.Errorf("changes %q lack %q", r.Changes, c)
				}
			}
			notes := strings.Join(r.Notes, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q lack %q", r.Notes, n)
				}
			}
		})
	}
}

func TestRefusesWhatItCannotRewrite(t *testing.T) {
	for _, in := range []string{
		`torchrun --nproc_per_node=8 train.py | tee log`,
		`cd /x && torchrun train.py`,
		`torchrun --nproc_per_node=$NGPU train.py`,
		`srun torchrun train.py`,
		`bash run.sh`,
		`torchrun --some-new-flag 3 train.py`,
		`torchrun --nproc_per_node=gpu train.py`,
		`torchrun "unbalanced`,
		``,
	} {
		words, err := Tokenize(in)
		if err == nil {
			_, err = Rewrite(words, Options{})
		}
		if err == nil {
			t.Errorf("%q: rewritten instead of explained", in)
		}
	}
}

// Every argument of the rewritten command must reach the program exactly as
// in the original (checked by letting bash split both).
func TestArgumentsSurviveShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	in := `torchrun --nproc_per_node=8 train.py --name "a b" --glob '*.json' --q 'it'\''s' --empty "" --esc a\ b`
	words, err := Tokenize(in)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Rewrite(words, Options{})
	if err != nil {
		t.Fatal(err)
	}
	split := func(line string) string {
		out, err := exec.Command(bash, "-c", "f(){ printf '<%s>' \"$@\"; }; f "+line).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	orig := split(strings.TrimPrefix(in, "torchrun --nproc_per_node=8 "))
	got := split(r.Command[strings.Index(r.Command, "train.py"):])
	if orig != got {
		t.Errorf("arguments changed:\n%s\n%s", orig, got)
	}
	argv := FromArgv([]string{"torchrun", "--nproc_per_node", "4", "train.py", "it's", "$HOME"})
	r, err = Rewrite(argv, Options{GPU: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != `CUDA_VISIBLE_DEVICES=3 torchrun --nproc_per_node=1 train.py 'it'\''s' '$HOME'` {
		t.Errorf("argv rewrite: %s", r.Command)
	}
}

func FuzzRewrite(f *testing.F) {
	for _, s := range []string{`accelerate launch --multi_gpu --num_processes 2 ./t.py x`, `torchrun --nnodes=2 a.py "q"`, `deepspeed --num_gpus 2 t.py`, `python -m torch.distributed.run --nproc_per_node 2 t.py`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Tokenize(s)
		if err != nil {
			return
		}
		r, err := Rewrite(words, Options{})
		if err != nil {
			return
		}
		if !strings.HasPrefix(r.Command, "CUDA_VISIBLE_DEVICES=") {
			t.Fatalf("rewrite of %q lacks CUDA_VISIBLE_DEVICES: %q", s, r.Command)
		}
		// The result must itself be a simple command ncclwiz can parse.
		if _, err := Tokenize(r.Command); err != nil {
			t.Fatalf("rewrite of %q is not re-parsable: %q: %v", s, r.Command, err)
		}
	})
}
