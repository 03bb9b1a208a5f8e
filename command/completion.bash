# bash completion for leasehold: source it from ~/.bashrc
#   source <(leasehold completion bash)
# or install it where bash-completion looks:
#   leasehold completion bash > ~/.local/share/bash-completion/completions/leasehold
# Adapted from urfave/cli v2's autocomplete/bash_autocomplete (MIT): the
# words before the cursor are run again with --generate-bash-completion,
# and leasehold prints the commands or flags that can follow them.

_leasehold_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}" opts
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  return 0
}

complete -o bashdefault -o default -F _leasehold_complete leasehold
