# _conda.sh: included (shell_host.script) wherever `conda activate` must work: the attempt
# wrapper (_job_wrapper.sh) and preflight.sh (which checks what they will do).
# conda_hook HOOK: HOOK (a conda.sh to source, or shell code to eval) when given (not "" or
# "-"), else the usual install places when conda is not on the PATH; then a bare conda
# executable (not the shell function, which alone can `activate`) is hooked in.
conda_hook() {
    if [ -n "$1" ] && [ "$1" != - ]; then
        if [ -f "$1" ]; then . "$1"; else eval "$1"; fi
    elif ! command -v conda >/dev/null 2>&1; then
        for eq_conda_home in "$HOME/miniconda3" "$HOME/anaconda3" "$HOME/miniforge3" \
                             "$HOME/mambaforge" /opt/conda /opt/miniconda3; do
            if [ -f "$eq_conda_home/etc/profile.d/conda.sh" ]; then
                . "$eq_conda_home/etc/profile.d/conda.sh"; break
            fi
        done
    fi
    case $(command -v conda 2>/dev/null) in
        /*) eval "$(conda shell.posix hook 2>/dev/null)" ;;
    esac
}
