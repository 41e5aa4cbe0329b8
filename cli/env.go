package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/steps"
	"github.com/ncclwiz/ncclwiz/steps/envsnippet"
)

func newEnvCmd(a *App) *cobra.Command {
	var shell string
	var set []string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the NCCL/PyTorch environment the findings call for",
		Long: `Collects the settings the checks recommend on this machine (for example
NCCL_SOCKET_IFNAME for the interface that routes to your peers,
NCCL_CUMEM_HOST_ENABLE=0 on odd NUMA layouts, NCCL_DEBUG=INFO for the next run),
each with its reason, and prints them for: ` + strings.Join(envsnippet.Formats, ", ") + `.

Only real NCCL/PyTorch variables are ever printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.Host()
			if err != nil {
				return err
			}
			findings, err := findingsNow(cmd.Context(), h)
			if err != nil {
				return err
			}
			vars := steps.EnvFrom(findings)
			for _, kv := range set {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usageError{fmt.Errorf("--set %q: want NAME=value", kv)}
				}
				vars = append(vars, envsnippet.Var{Name: k, Value: v, Reason: "set on the command line"})
			}
			if len(vars) == 0 {
				_, err := fmt.Fprintln(a.Stdout, "# Nothing to set: the checks recommend no environment changes on this machine.")
				return err
			}
			out, err := envsnippet.Render(shell, vars)
			if err != nil {
				return usageError{err}
			}
			_, err = fmt.Fprint(a.Stdout, out)
			return err
		},
	}
	cmd.Flags().StringVar(&shell, "shell", "bash", "format: "+strings.Join(envsnippet.Formats, ", "))
	cmd.Flags().StringSliceVar(&set, "set", nil, "add NAME=value (must be a real NCCL/PyTorch variable)")
	return cmd
}
