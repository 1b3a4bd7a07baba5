# preflight.sh CWD LAUNCHER QUERY_GPUS CONDA CONDA_HOOK [VENV [JOB_PATH]]   ('-' = not set)
# stdin: preconditions, one `P<TAB>key<TAB>glob` a line (globs relative to CWD); commands,
# `C<TAB>key<TAB>word` (must resolve with `command -v` in the jobs' environment: CWD, conda
# env or venv activated) and `S<TAB>key<TAB>path` (a script that must exist relative to CWD).
# One line per check: `check<TAB>ok|fail<TAB>detail`; a precondition's detail is `key<TAB>glob`,
# a command's or script's `key<TAB>word`. A bare command word that does not resolve is followed
# by `suggest<TAB>ok<TAB>key<TAB>name` for each executable on the PATH about as long (within two
# characters), which eq-tui ranks for a "did you mean".
set -u
set -f
cwd=$1 launcher=$2 query_gpus=$3 conda_env=$4 conda_hook=$5 venv=${6:--} job_path=${7:--}
tab=$(printf '\t')
report() { printf '%s\t%s\t%s\n' "$1" "$2" "$3"; }

report connection ok "$(hostname 2>/dev/null) $(uname -sr 2>/dev/null)"
relative_ok=0
if [ "$cwd" = "-" ]; then
    report cwd ok "home directory"
    cd && relative_ok=1
elif [ -d "$cwd" ]; then
    report cwd ok "$cwd"
    cd "$cwd" && relative_ok=1
else
    report cwd fail "working directory $cwd does not exist"
fi
if command -v "$launcher" >/dev/null 2>&1; then
    # screen's version flag is -v (-V prints its usage), tmux's is -V
    case $launcher in screen) flag=-v ;; *) flag=-V ;; esac
    # "Screen version 4.09.00 (GNU) 30-Jan-22" / "tmux 3.3a" -> the version number alone
    version=$("$launcher" "$flag" 2>&1 </dev/null |
              sed -n "s/^[Ss]creen version \([^ ]*\).*/\1/p; s/^tmux \([^ ]*\).*/\1/p" |
              head -n 1)
    report launcher ok "$launcher ${version:-(version unknown)}"
else
    report launcher fail "$launcher is not installed (apt-get install $launcher)"
fi
if [ "$query_gpus" = 1 ]; then
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        report nvidia-smi fail "nvidia-smi is not on PATH"
    elif out=$(nvidia-smi -L 2>&1 </dev/null); then
        report nvidia-smi ok "$(printf '%s\n' "$out" | grep -c '^GPU') GPU(s)"
    else
        report nvidia-smi fail "$(printf '%s' "$out" | head -n 1)"
    fi
fi
# the jobs' PATH (the manifest's env sets it) before their conda env or venv, as at launch
[ "$job_path" = "-" ] || PATH=$job_path
# eq-tui include: _conda.sh
if [ "$conda_env" != "-" ]; then
    conda_hook "$conda_hook" >/dev/null 2>&1 </dev/null
    if ! command -v conda >/dev/null 2>&1; then
        report conda fail "not found (set conda_hook to your conda.sh)"
    elif conda env list 2>/dev/null </dev/null | awk '{print $1}' | grep -qxF -e "$conda_env" ||
         [ -d "$conda_env" ]; then
        report conda ok "$conda_env"
        conda activate "$conda_env" >/dev/null 2>&1 </dev/null
    else
        report conda fail "conda env $conda_env does not exist"
    fi
fi
if [ "$venv" != "-" ]; then
    if [ "$relative_ok" = 1 ] && [ -f "$venv/bin/activate" ]; then
        report venv ok "$venv"
        . "$venv/bin/activate" >/dev/null 2>&1 </dev/null
    else
        report venv fail "virtualenv $venv has no bin/activate"
    fi
fi

# suggest KEY WORD: the executables on the PATH within two characters of WORD's length
suggest() {
    n=${#2}
    old_ifs=$IFS
    IFS=:
    for dir in $PATH; do
        [ -d "$dir" ] || continue
        ls -1 "$dir" 2>/dev/null | awk -v n="$n" 'length($0) >= n - 2 && length($0) <= n + 2' |
            head -n 500 | while IFS= read -r name; do
                [ -f "$dir/$name" ] && [ -x "$dir/$name" ] && report suggest ok "$1$tab$name"
            done
    done
    IFS=$old_ifs
}

# eq-tui include: _matches.sh
while IFS="$tab" read -r kind key value; do
    case $kind in
        P) if matches "$value"; then state=ok; else state=fail; fi
           report precondition "$state" "$key$tab$value" ;;
        C) [ "$relative_ok" = 1 ] || continue
           if command -v "$value" >/dev/null 2>&1; then state=ok; else state=fail; fi
           report command "$state" "$key$tab$value"
           case $state$value in fail*/*) ;; fail*) suggest "$key" "$value" ;; esac ;;
        S) [ "$relative_ok" = 1 ] || continue
           if [ -e "$value" ]; then state=ok; else state=fail; fi
           report script "$state" "$key$tab$value" ;;
    esac
done
exit 0
