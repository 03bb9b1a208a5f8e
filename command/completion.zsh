#compdef leasehold
# zsh completion for leasehold: put it on $fpath as _leasehold
#   leasehold completion zsh > "${fpath[1]}/_leasehold"
# or, after compinit, source it from ~/.zshrc:
#   source <(leasehold completion zsh)
# Adapted from urfave/cli v2's autocomplete/zsh_autocomplete (MIT).

_leasehold() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi

  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

if [[ "$funcstack[1]" == "_leasehold" ]]; then
  _leasehold "$@"
else
  compdef _leasehold leasehold
fi
