/**
 * Shell completion scripts. They are thin: every shell asks `aenv __complete -- <words>` for the
 * candidates of the word under the cursor and falls back to file names when it answers nothing.
 */

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

const BASH = `# aenv completion for bash. Load it with:  source <(aenv completion bash)
_aenv_complete() {
  local cur="\${COMP_WORDS[COMP_CWORD]}"
  local IFS=$'\\n'
  local candidates
  candidates=$(aenv __complete -- "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
  COMPREPLY=($(compgen -W "$candidates" -- "$cur"))
}
complete -o default -o bashdefault -F _aenv_complete aenv
`;

const ZSH = `#compdef aenv
# aenv completion for zsh. Load it (after compinit) with:  source <(aenv completion zsh)
_aenv() {
  local -a candidates
  candidates=("\${(@f)$(aenv __complete -- "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  candidates=(\${candidates:#})
  if (( \${#candidates} )); then
    compadd -- "\${candidates[@]}"
  else
    _files
  fi
}
compdef _aenv aenv
`;

const FISH = `# aenv completion for fish. Load it with:  aenv completion fish | source
function __aenv_complete
    set -l words (commandline -opc)
    set -e words[1]
    set -l out (aenv __complete -- $words (commandline -ct) 2>/dev/null)
    if test (count $out) -eq 0
        __fish_complete_path (commandline -ct)
    else
        printf '%s\\n' $out
    end
end
complete -c aenv -f -a '(__aenv_complete)'
`;

export function completionScript(shell: Shell): string {
  return { bash: BASH, zsh: ZSH, fish: FISH }[shell];
}
