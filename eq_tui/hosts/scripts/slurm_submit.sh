# slurm_submit.sh JOB_NAME ATTEMPT_DIR [SBATCH_ARG ...]
# stdin: as launch.sh (a line with the number N of env lines, N `export NAME='value'` lines, the
# command text, then EQ_LAUNCH_END). The environment reaches the job through sbatch's
# --export=ALL (Slurm keeps it with the job), never a file or a command line.
# Prints the Slurm job id. Exit 3: the attempt dir exists already; a job of this name that Slurm
# still knows is the attempt itself, so nothing is submitted twice. Exit 5: Slurm cannot write a
# log at that path.
set -u
name=$1 dir=$2
shift 2

sbatch_bin=$(command -v sbatch) || { echo "eq-tui: sbatch is not installed here" >&2; exit 4; }
# Slurm expands %j, %u, ... in --output (a '%' in the path would lose the log and fail the job):
# '%%' is a literal '%'. A backslash makes Slurm drop every backslash: no way to name that path.
case $dir in
    *\\*) echo "eq-tui: Slurm cannot write a log under a path with a backslash: $dir" >&2
           exit 5 ;;
esac
output=$(printf '%s/log\n' "$dir" | sed 's/%/%%/g')
existing=$(squeue -h -t all -u "$(id -un)" --name="$name" -o %i 2>/dev/null </dev/null | head -n 1)
if [ -n "$existing" ]; then
    [ -d "$dir" ] && [ ! -s "$dir/slurm_job_id" ] && echo "$existing" > "$dir/slurm_job_id"
    echo "$existing"
    exit 0
fi
mkdir -p "$(dirname "$dir")" 2>/dev/null
if ! mkdir "$dir" 2>/dev/null; then
    echo "eq-tui: attempt dir $dir already exists or cannot be created; not submitting" >&2
    exit 3
fi

not_starting="not submitting"
# eq-tui include: _launch_request.sh
read_launch_request
printf '%s' "$cmd" > "$dir/cmd" || fail_write cmd

cat > "$dir/run.sh" <<'WRAPPER'
# eq-tui include: _job_wrapper.sh
WRAPPER
[ -s "$dir/run.sh" ] || fail_write run.sh

# The job's environment is set in the subshell that becomes sbatch only: a PATH of the
# manifest's must not hide mv from the lines below (the job id record).
if ! id=$(eval "$envtext" && exec "$sbatch_bin" --parsable --job-name="$name" \
              --output="$output" --open-mode=append --export=ALL "$@" "$dir/run.sh" "$dir" slurm \
              2>"$dir/sbatch.err" </dev/null); then
    cat "$dir/sbatch.err" >&2
    exit 6
fi
id=${id%%;*}
[ -s "$dir/sbatch.err" ] || rm -f "$dir/sbatch.err"
echo "$id" > "$dir/slurm_job_id.tmp" && mv "$dir/slurm_job_id.tmp" "$dir/slurm_job_id"
echo "$id"
