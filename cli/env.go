package cli

import (
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/internal/termio"
	"github.com/ncclwiz/ncclwiz/internal/textsafe"
	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

func newEnvCmd(a *App) *cobra.Command {
	var shell string
	var set []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the NCCL/PyTorch environment the findings call for",
		Long: `Runs the checks and prints the environment settings they recommend on this
machine — for example NCCL_SOCKET_IFNAME for the interface that reaches the
other nodes, NCCL_IB_DISABLE=1 without usable InfiniBand, NCCL_CUMEM_HOST_ENABLE=0
on NUMA layouts that break NCCL's cuMem probe, NCCL_DEBUG=INFO for the next
run — each with its reason, in the format of the place you set them:

  bash, zsh   export lines          fish    set -gx lines
  python      os.environ block      dotenv  NAME=value file
  slurm       #SBATCH --export=…    docker  -e options
  k8s         a container env: list

Variables that do nothing or were renamed (NCCL_TIMEOUT, NCCL_SHM_DIR,
NCCL_ASYNC_ERROR_HANDLING …) are removed in the format's own way — unset,
set -e, os.environ.pop, or "delete this entry" for dotenv, docker and k8s —
with the new name or the init_process_group(timeout=…) line that replaces
them, and the startup-file lines (~/.bashrc:12 …) to delete by hand.

Last-resort settings (NCCL_SHM_DISABLE=1) are printed commented out. Only
documented NCCL/PyTorch/CUDA variables are ever set; --set adds your own
(which win over the findings). Notes about dropped or conflicting
recommendations go to stderr. On a practice scenario (--scenario) every
line is commented out and the snippet is marked: it describes the
simulation, not this machine.`,
		Example: `  ncclwiz env
  ncclwiz env --shell fish > nccl.fish
  ncclwiz env --shell k8s
  ncclwiz env --shell slurm --set NCCL_DEBUG=WARN`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format := shell
			if format == "" {
				format = shellFromEnv(a.Env)
			}
			format, err := envsnippet.Normalize(format)
			if err != nil {
				return usageError{err}
			}
			var user []envsnippet.Var
			for _, kv := range set {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--set %q: want NAME=value", kv)}
				}
				u := envsnippet.Var{Name: k, Value: v, Reason: "set on the command line"}
				if err := envsnippet.Validate([]envsnippet.Var{u}); err != nil {
					return usageError{fmt.Errorf("--set: %w", err)}
				}
				user = append(user, u)
			}
			h, err := a.Host()
			if err != nil {
				return err
			}
			findings, err := findingsNow(cmd.Context(), h)
			if err != nil {
				return err
			}
			// A check that did not finish recommends nothing; the snippet
			// must not look complete ("Nothing to set") without saying so.
			for _, f := range findings {
				if f.Incomplete {
					fmt.Fprintf(a.Stderr, "ncclwiz: the check %s did not finish (%s); anything it would recommend is missing here\n", f.Check, textsafe.Clean(f.Title))
				}
			}
			vars, conflicts, invalid := steps.EnvPlan(findings, user)
			if asJSON {
				return writeJSON(a, envDoc(a, h.Simulated, vars, conflicts, invalid))
			}
			for _, c := range conflicts {
				fmt.Fprintf(a.Stderr, "ncclwiz: left out %s: the findings disagree (%s); choose with --set %s=…\n", c.Name, textsafe.Clean(c.String()), c.Name)
			}
			for _, i := range invalid {
				fmt.Fprintf(a.Stderr, "ncclwiz: dropped %s\n", textsafe.Clean(i))
			}
			if len(vars) == 0 {
				_, err := fmt.Fprintln(a.Stdout, "# Nothing to set: the checks recommend no environment change on this machine.")
				return err
			}
			out, err := steps.EnvSnippet(h, format, vars)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(a.Stdout, out)
			return err
		},
	}
	cmd.Flags().StringVar(&shell, "shell", "", "format: "+strings.Join(envsnippet.Formats, ", ")+" (default: from $SHELL, else bash)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the variables, conflicts and dropped settings as JSON (docs/env.schema.json) instead of a snippet")
	cmd.Flags().StringArrayVar(&set, "set", nil, "add NAME=value (a documented NCCL/PyTorch/CUDA variable; repeatable)")
	return cmd
}

// shellFromEnv picks the format for the user's login shell.
func shellFromEnv(env []string) string {
	switch path.Base(termio.Getenv(env, "SHELL")) {
	case "fish":
		return "fish"
	case "zsh":
		return "zsh"
	}
	return "bash"
}
