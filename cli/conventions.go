package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/ncclwiz/ncclwiz/envvars"
)

// examples are the Examples: sections of the commands that do not set
// their own, by command path. TestEveryCommandHasExamples checks that every
// visible command has one and that each flag an example uses exists.
var examples = map[string]string{
	"ncclwiz": `  ncclwiz                          # in a terminal: the wizard
  ncclwiz --scenario shm-orphans   # practise on a simulated broken server
  ncclwiz --list-scenarios
  ncclwiz -v | less                # without a terminal: the check report, with details`,
	"ncclwiz check": `  ncclwiz check
  ncclwiz check -v --only shm,gpu.inventory
  ncclwiz check --json > node.json
  ncclwiz check --list-checks
  ncclwiz check --peer gpu-node-1:29500    # can this host reach rank 0's rendezvous port?`,
	"ncclwiz explain": `  ncclwiz explain train.log
  ncclwiz explain logs/rank*.log train.err.gz
  kubectl logs job/train | ncclwiz explain -
  ncclwiz explain -v --json train.log > explain.json`,
	"ncclwiz guides": `  ncclwiz guides                     # browse (in a terminal)
  ncclwiz guides --list
  ncclwiz guides shm-no-space
  ncclwiz guides --search "watchdog timeout"
  ncclwiz guides --list --json`,
	"ncclwiz hang": `  ncclwiz hang                       # the one running job, if there is one
  ncclwiz hang --pid 4121            # the launcher's or any rank's PID
  ncclwiz hang --pid 4121 --py-spy   # with each suspect rank's Python stack (asks first)
  ncclwiz hang --dumps /tmp/nccl_trace_rank_
  ncclwiz hang --pid 4121 --json > hang.json`,
	"ncclwiz report": `  ncclwiz report -o report.md
  ncclwiz report --no-redact > report.md`,
	"ncclwiz test": `  ncclwiz test
  ncclwiz test --gpus 2 --rungs single,all
  ncclwiz test --env NCCL_P2P_DISABLE=1
  ncclwiz test --backend nccl-tests --nccl-tests ~/nccl-tests/build --json`,
	"ncclwiz version": `  ncclwiz version
  ncclwiz version --json`,
	"ncclwiz man": `  ncclwiz man | man -l -
  ncclwiz man ~/.local/share/man/man1`,
	"ncclwiz cluster": `  ncclwiz cluster check --hosts gpu[01-04]
  ncclwiz cluster check --slurm`,
	"ncclwiz cluster check": `  ncclwiz cluster check --hosts gpu[01-04]
  ncclwiz cluster check --slurm                     # inside salloc or sbatch
  ncclwiz cluster check --hostfile hosts.txt --mesh
  ncclwiz cluster check --hosts login1,gh[01-02] --binary arm64=./ncclwiz_linux_arm64/ncclwiz
  ncclwiz cluster check --debug --hosts gpu01,gpu02 # print the ssh commands it runs
  ncclwiz cluster check --from-json reports/ --json`,
	"ncclwiz completion": `  ncclwiz completion bash > ~/.local/share/bash-completion/completions/ncclwiz
  ncclwiz completion zsh > "${fpath[1]}/_ncclwiz"
  ncclwiz completion fish > ~/.config/fish/completions/ncclwiz.fish`,
	"ncclwiz completion bash":       `  source <(ncclwiz completion bash)`,
	"ncclwiz completion zsh":        `  ncclwiz completion zsh > "${fpath[1]}/_ncclwiz"`,
	"ncclwiz completion fish":       `  ncclwiz completion fish | source`,
	"ncclwiz completion powershell": `  ncclwiz completion powershell | Out-String | Invoke-Expression`,
}

// applyConventions gives every command its Examples: section and every
// value flag without completions the ones that fit it.
func applyConventions(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = examples[c.CommandPath()]
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	flagCompletions(root)
}

// flagKinds completes value flags by what they take, on whichever command
// has them.
var flagKinds = map[string]string{
	"shm-path": "dir", "from-json": "dir", "save": "dir", "log-dir": "dir", "nccl-tests": "dir",
	"hostfile": "file", "ssh-config": "file", "remote-path": "file", "output": "file", "export": "file",
	"dumps": "file", "python": "file",
}

// noFiles are value flags whose values cannot be listed: numbers,
// durations, host names, addresses, free text.
var noFiles = []string{"peer", "hosts", "nodelist", "slurm-job", "master", "timeout", "connect-timeout", "fanout",
	"max-rows", "max-line", "max-stream", "search", "pid", "interval", "ras-addr", "gpus", "max-size", "tolerance",
	"ssh-option", "set", "gpu"}

func flagCompletions(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for name, kind := range flagKinds {
			if c.LocalFlags().Lookup(name) == nil {
				continue
			}
			if _, ok := c.GetFlagCompletionFunc(name); ok {
				continue
			}
			if kind == "dir" {
				_ = c.MarkFlagDirname(name)
			} else {
				_ = c.MarkFlagFilename(name)
			}
		}
		for _, name := range noFiles {
			if f := c.LocalFlags().Lookup(name); f != nil {
				if _, ok := c.GetFlagCompletionFunc(name); !ok {
					_ = c.RegisterFlagCompletionFunc(name, cobra.NoFileCompletions)
				}
			}
		}
		registerOn(c, "engine", oneOf("auto", "pdsh", "ssh"))
		registerOn(c, "copy", oneOf("auto", "never", "always"))
		registerOn(c, "contain", oneOf("pid-namespace", "subreaper"))
		registerOn(c, "binary", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"amd64=", "arm64="}, cobra.ShellCompDirectiveNoSpace
		})
		// test --env takes a candidate fix: the variables a fix may suggest.
		if c.Name() == "test" {
			registerOn(c, "env", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				var out []string
				for _, v := range envvars.All() {
					if v.Suggestible() && strings.HasPrefix(v.Name, "NCCL_") {
						out = append(out, v.Name+"=")
					}
				}
				return out, cobra.ShellCompDirectiveNoSpace
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
