#!/bin/sh
# eq-tui attempt wrapper, one for every launcher: launch.sh (screen, tmux) and slurm_submit.sh
# write it as the attempt's run.sh. It records the process group, pid and start beside the log,
# enters the job's directory and environments, runs the command and writes the command's own
# exit code (not tee's) atomically to `exit`, with a stop's fields.
#   run.sh DIR          in a screen/tmux session: the environment comes from DIR/env.fifo, the
#                       output goes through tee to DIR/log, and the launch's GPU claims (DIR/claims)
#                       are the wrapper's from the start to the end
#   run.sh DIR slurm    a Slurm batch script: the environment came with the job (--export=ALL),
#                       Slurm writes the output to the log, and a stop signals this shell too
dir=$1 eq_under=${2:-session}
# eq-tui include: _attempt_records.sh
# eq-tui include: _conda.sh
# eq-tui include: _proc_groups.sh
# eq-tui include: _claims.sh
# the launch's claims are this wrapper's from before it reads its environment (the launch
# waits for that), so they never name a process that is gone while the attempt runs
eq_claims=
if [ -s "$dir/claims" ]; then
    read -r eq_claims < "$dir/claims"
    # shellcheck disable=SC2086
    claims_own $$ $eq_claims
fi
# the process group before the environment is read: once the launch has handed that over (and
# returned), the attempt's group is on disk for the probe and for kill.sh
proc_groups $$
echo "$eq_pgid" > "$dir/pgid"
# A stop of a Slurm job (slurm_cancel.sh) signals the whole batch step, this shell too: it stays
# to record how the job ended, and so does the shell that runs the command (dash does not exec
# its one command: it would die at once, its exit recorded while the job still saves, and the
# job be killed with the step once this script ends). Traps with an action, not ignored
# signals: the job's own processes start with each signal's default. Under screen/tmux a stop
# (kill.sh) never signals the wrapper.
eq_traps=
[ "$eq_under" != slurm ] || eq_traps="trap : TERM INT HUP USR1 USR2"
$eq_traps
# run_job: the job's directory, conda env and virtualenv, then its command; the start is
# stamped just after the fork (the job does not wait for `date`)
run_job() {
    if [ -n "${EQ_CWD:-}" ] && ! cd "$EQ_CWD"; then
        fail "working directory $EQ_CWD does not exist on $(hostname)"
    fi
    if [ -n "${EQ_CONDA:-}" ]; then
        conda_hook "${EQ_CONDA_HOOK:-}"
        conda activate "$EQ_CONDA" || fail "could not activate conda env $EQ_CONDA"
    fi
    if [ -n "${EQ_VENV:-}" ]; then
        [ -f "$EQ_VENV/bin/activate" ] || fail "virtualenv $EQ_VENV has no bin/activate"
        . "$EQ_VENV/bin/activate"
    fi
    if ! command_text=$(cat "$dir/cmd") || [ -z "$command_text" ]; then
        fail "cannot read the command from $dir/cmd"
    fi
    [ -z "$eq_traps" ] || command_text="$eq_traps
$command_text"
    sh -c "$command_text" &
    eq_job=$!
    echo "$eq_job" > "$dir/pid"
    stamp start
    # a trapped signal ends `wait` early: wait again until the job itself has ended
    while :; do
        wait "$eq_job"
        eq_code=$?
        kill -0 "$eq_job" 2>/dev/null || break
    done
    finish "$eq_code"
}
if [ "$eq_under" = slurm ]; then
    run_job
else
    . "$dir/env.fifo"
    rm -f "$dir/env.fifo"
    run_job 2>&1 | tee -a "$dir/log"
fi
# shellcheck disable=SC2086
[ -z "$eq_claims" ] || claims_drop $$ $eq_claims
