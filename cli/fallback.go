package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/steps/launch"
	"github.com/ncclwiz/ncclwiz/textsafe"
)

func newFallbackCmd(a *App) *cobra.Command {
	var gpu string
	cmd := &cobra.Command{
		Use:   "fallback -- COMMAND...",
		Short: "Rewrite a multi-GPU launch command into a single-GPU run",
		Long: `Rewrites torchrun, python -m torch.distributed.run/launch, accelerate launch,
deepspeed or python into a one-GPU run and says what changes. Every script
argument is kept exactly. Prints the command; it does not run it.

  ncclwiz fallback -- accelerate launch --multi_gpu --num_processes 2 train.py
  ncclwiz fallback "torchrun --nproc_per_node=8 train.py --name 'a b'"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			words := launch.FromArgv(args)
			if len(args) == 1 {
				ws, err := launch.Tokenize(args[0])
				if err != nil {
					return usageError{fmt.Errorf("cannot rewrite this command: %w", err)}
				}
				words = ws
			}
			r, err := launch.Rewrite(words, launch.Options{GPU: gpu})
			if err != nil {
				return usageError{fmt.Errorf("cannot rewrite this command safely: %w", err)}
			}
			out := a.Stdout
			fmt.Fprintln(out, textsafe.Sanitize(r.Command))
			fmt.Fprintf(a.Stderr, "\n%s, now on one GPU:\n", r.Launcher)
			for _, c := range r.Changes {
				fmt.Fprintln(a.Stderr, "  - "+textsafe.Sanitize(c))
			}
			for _, n := range r.Notes {
				fmt.Fprintln(a.Stderr, "  note: "+textsafe.Sanitize(n))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&gpu, "gpu", "", "GPU index to use (default: the first of CUDA_VISIBLE_DEVICES, else 0)")
	return cmd
}
