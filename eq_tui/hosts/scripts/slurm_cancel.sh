# slurm_cancel.sh JOB_NAME ATTEMPT_DIR [SIGNAL [GRACE]]
# The job addressed by the id recorded at submit; by the exact job name when that record is
# missing. Slurm's own convention for a stop that lets the job save its work: SIGNAL (TERM by
# default) to all of the job's processes (`scancel --signal --full`: the batch step's too; the
# wrapper traps it and stays to record the exit), then, once GRACE seconds (5 by default) have
# run out with the job still there, Slurm's cancel (SIGTERM again, SIGKILL after the cluster's
# KillWait). Not waited once the job is gone (its exit record written or Slurm no longer running
# it); a job still pending is only cancelled. The stop's fields go to `stop`, which the wrapper appends to its exit record; a job
# SIGKILLed with its wrapper gets its exit record here.
set -u
name=$1 dir=$2 stop_signal=${3:-TERM} grace=${4:-5}
# eq-tui include: _stop_args.sh
stop_args slurm_cancel.sh "$stop_signal" "$grace"

set -f
killed=
id=$(cat "$dir/slurm_job_id" 2>/dev/null)
# the job as scancel and squeue name it (ids and eq-tui's job names have no blanks)
case $id in
    ''|*[!0-9_]*) job="-u $(id -un) --name=$name" listed=$job ;;
    *) job=$id listed="-j $id" ;;
esac
# shellcheck disable=SC2086
listed() { squeue -h -t "$1" -o %i $listed 2>/dev/null </dev/null; }
# Running: Slurm still runs it and its wrapper has not recorded its exit.
running() { [ ! -e "$dir/exit" ] && [ -n "$(listed CF,R,S,ST)" ]; }
stop_record() {
    printf 'stop %s\nsignal %s\ngrace %s\ngrace_ran_out %s\n' \
        "$stop_signal" "$1" "$grace" "$2" > "$dir/stop.tmp" && mv "$dir/stop.tmp" "$dir/stop"
}
# shellcheck disable=SC2086
if running; then
    [ ! -d "$dir" ] || stop_record "$stop_signal" 0
    if scancel --signal="$stop_signal" --full $job 2>/dev/null </dev/null; then
        # the exit record is looked for each tenth of a second, Slurm asked once a second
        waited=0
        while [ "$waited" -lt "$grace_tenths" ]; do
            [ ! -e "$dir/exit" ] || break
            if [ "$((waited % 10))" = 9 ] && ! running; then break; fi
            sleep 0.1 2>/dev/null || sleep 1
            waited=$((waited + 1))
        done
        if running; then
            [ ! -d "$dir" ] || stop_record KILL 1
            # Slurm's cancel: to Slurm a SIGKILL is one too (SIGTERM again, SIGKILL after the
            # cluster's KillWait), the wrapper's with the rest
            scancel $job 2>/dev/null </dev/null && killed=1
            # the wrapper goes with its job: the record is written here, as it would have
            if [ -d "$dir" ] && [ ! -e "$dir/exit" ]; then
                ended=$(date +%s.%N 2>/dev/null)
                case $ended in *N*|"") ended=$(date +%s) ;; esac
                [ -s "$dir/start" ] || echo "$ended" > "$dir/start"
                echo "$ended" > "$dir/end"
                { echo 137; cat "$dir/stop"; } > "$dir/exit.tmp" && mv "$dir/exit.tmp" "$dir/exit"
            fi
            # cancelled: another cancel would only add a SIGTERM
            [ -z "$killed" ] || exit 0
        fi
    fi
fi
# a job that is pending, ended or gone: Slurm's cancel (nothing to do for the last two)
# shellcheck disable=SC2086
scancel $job 2>/dev/null </dev/null && exit 0
# scancel refuses a job that has just ended: that is no failure
[ -z "$(listed PD,CF,R,S,ST)" ] && exit 0
# shellcheck disable=SC2086
exec scancel $job </dev/null
