package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/steps/launch"
)

// maxConfigBytes bounds the config files fallback reads.
const maxConfigBytes = 1 << 20

func newFallbackCmd(a *App) *cobra.Command {
	var gpu string
	cmd := &cobra.Command{
		Use:   "fallback [--gpu N] -- COMMAND [ARGS...]",
		Short: "Rewrite a multi-GPU launch command into a one-GPU run",
		Long: `Rewrites a torchrun, python -m torch.distributed.run/launch, accelerate launch,
deepspeed or python command into a run on one GPU, so training can go on
while the multi-GPU problem is fixed. Every script argument is kept exactly as
written; the launcher options that start several processes or nodes are
changed, and the changes are listed with what they mean for the global batch
(and the gradient accumulation that keeps it). Config files named on the
command line (accelerate --config_file, a DeepSpeed JSON) are read to say so
precisely. The command is printed, not run.

The command can be given after --, as one quoted argument (its quoting is then
kept as written), or on stdin with "-" (a line from a job script; lines ending
in \ continue). Pipelines, lists, redirections and command substitutions are
refused with an explanation, as is anything ncclwiz cannot rewrite safely.

Exit codes: 0 rewritten; 1 not rewritable (the reason is printed); 2 usage.`,
		Example: `  ncclwiz fallback -- accelerate launch --multi_gpu --num_processes 2 train.py
  ncclwiz fallback "torchrun --nproc_per_node=8 train.py --name 'run 1'"
  ncclwiz fallback --gpu 3 -- deepspeed --num_gpus 8 train.py --deepspeed ds.json
  grep torchrun job.sh | ncclwiz fallback -`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var words []launch.Word
			var err error
			switch {
			case len(args) == 1 && args[0] == "-":
				b, rerr := io.ReadAll(io.LimitReader(a.Stdin, 1<<16+1))
				if rerr != nil {
					return fmt.Errorf("read the command from stdin: %w", rerr)
				}
				words, err = launch.Tokenize(strings.TrimSpace(string(b)))
			case len(args) == 1 && strings.ContainsAny(args[0], " \t\n"):
				words, err = launch.Tokenize(args[0])
			default:
				words = launch.FromArgv(args)
			}
			if err == nil {
				for _, w := range words {
					if !textsafe.IsClean(strings.ReplaceAll(w.Value, "\n", "")) {
						err = fmt.Errorf("%w: an argument contains control characters", launch.ErrCannotRewrite)
						break
					}
				}
			}
			var r launch.Result
			if err == nil {
				r, err = launch.Rewrite(words, launch.Options{GPU: gpu, ReadFile: readSmall, AccelerateDefaultConfig: accelerateDefaultConfig(a.Env)})
			}
			if err != nil {
				// Not rewritable (or not one command): the explanation is the answer.
				fmt.Fprintf(a.Stderr, "ncclwiz fallback: %s\n", textsafe.Clean(err.Error()))
				return ExitError{Code: 1}
			}
			fmt.Fprintln(a.Stdout, textsafe.SanitizeMultiline(r.Command))
			fmt.Fprintf(a.Stderr, "\n%s on one GPU (GPU %s):\n", r.Launcher, textsafe.Sanitize(r.GPU))
			for _, c := range r.Changes {
				fmt.Fprintln(a.Stderr, "  - "+textsafe.Sanitize(c))
			}
			for _, n := range r.Notes {
				fmt.Fprintln(a.Stderr, "  note: "+textsafe.Sanitize(n))
			}
			return nil
		},
	}
	// A launcher option before "--" reaches cobra as an unknown flag of
	// fallback; say how to pass it instead of only rejecting it.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\n  put -- before the command so its options are kept as written: ncclwiz fallback -- torchrun --nproc_per_node=8 train.py", err)}
	})
	cmd.Flags().StringVar(&gpu, "gpu", "", "GPU to run on (default: the first of CUDA_VISIBLE_DEVICES on the command line, else 0)")
	return cmd
}

// readSmall reads a config file named on the command line, relative to the
// current directory, refusing anything that is not a small regular file.
func readSmall(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxConfigBytes {
		return nil, fmt.Errorf("%s is not a small regular file", name)
	}
	return os.ReadFile(name)
}

// accelerateDefaultConfig is where accelerate looks when no --config_file
// is given: $HF_HOME/accelerate/default_config.yaml, HF_HOME defaulting to
// $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface.
func accelerateDefaultConfig(env []string) string {
	hf := termio.Getenv(env, "HF_HOME")
	if hf == "" {
		cache := termio.Getenv(env, "XDG_CACHE_HOME")
		if cache == "" {
			home := termio.Getenv(env, "HOME")
			if home == "" {
				return ""
			}
			cache = filepath.Join(home, ".cache")
		}
		hf = filepath.Join(cache, "huggingface")
	}
	return filepath.Join(hf, "accelerate", "default_config.yaml")
}
