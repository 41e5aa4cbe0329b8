package steps

import (
	"context"

	"github.com/ncclwiz/ncclwiz/host"
	"github.com/ncclwiz/ncclwiz/steps/launch"
)

// fallbackExample is the seed's failing launch line, shown rewritten.
const fallbackExample = "accelerate launch --multi_gpu --num_processes 2 ./train_low_mem.py train --is_finetune=True"

func planSingleGPU(_ context.Context, _ *host.Host, r *request) *Fix {
	lines := []string{"ncclwiz fallback -- torchrun --nproc_per_node=8 train.py   # your own launch command after --"}
	if ws, err := launch.Tokenize(fallbackExample); err == nil {
		if res, err := launch.Rewrite(ws, launch.Options{}); err == nil {
			lines = append(lines, "# for example", "#   "+fallbackExample, "# becomes", "#   "+res.Command)
		}
	}
	return &Fix{
		ID: "launch.single-gpu", Title: "Keep training on one GPU while the multi-GPU problem is fixed",
		Summary: "A one-process run needs no NCCL traffic between GPUs, so it works around every failure here. `ncclwiz fallback -- <launch command>` " +
			"rewrites torchrun, python -m torch.distributed.run/launch, accelerate launch, deepspeed or python into a one-GPU run, keeps every " +
			"script argument exactly as written, and says what changes: the global batch shrinks unless gradient accumulation grows to match.",
		Guide: "single-gpu-fallback", Risk: RiskNone, Manual: true,
		Steps: []Step{{Lines: lines}},
	}
}
