package command

import (
	_ "embed"
	"fmt"

	"github.com/urfave/cli/v2"
)

// The scripts ask the binary itself what may follow the words typed so far
// (cli's --generate-bash-completion), so they never go stale.
var (
	//go:embed completion.bash
	bashCompletion string
	//go:embed completion.zsh
	zshCompletion string
)

// completionCommand prints a shell completion script.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash or zsh",
		ArgsUsage: "bash|zsh",
		Description: "bash: add `source <(leasehold completion bash)` to ~/.bashrc.\n" +
			"zsh:  leasehold completion zsh > \"${fpath[1]}/_leasehold\", then start a new shell\n" +
			"      (or add `source <(leasehold completion zsh)` to ~/.zshrc, after compinit).",
		BashComplete: func(c *cli.Context) { fmt.Fprintln(c.App.Writer, "bash\nzsh") },
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("completion takes one SHELL, bash or zsh; got %d arguments", c.NArg())
			}
			switch shell := c.Args().First(); shell {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			default:
				return usageError("no completion for shell %q: want bash or zsh", shell)
			}
			return nil
		},
	}
}
