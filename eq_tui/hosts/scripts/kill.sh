# kill.sh LAUNCHER SESSION ATTEMPT_DIR [REASON [SIGNAL [GRACE]]]
# A stop that lets the job save its work: SIGNAL (TERM by default) to the job's processes only,
# never to its wrapper, so the wrapper and its screen/tmux session stay up and no SIGHUP from a
# closing terminal reaches the job; KILL to what is left of the job after GRACE seconds (5 by
# default; tenths count); the wrapper then records the exit, the stop's fields included
# (`stop`, beside the attempt's records, is appended to `exit`), and ends. Only then the session
# is ended, addressed exactly (screen by PID.NAME, tmux by =NAME: a bare screen name matches by
# prefix), with KILL to anything of the group still there. The grace is not waited once the job
# is gone: a job that dies of its signal frees its GPUs at once.
# With REASON (a person's kill), an attempt that still has no exit record gets one (128 + the
# signal that ended it, and the stop's fields) and its log a line saying why and how it ended.
# A stop record already there (an engine that ended during a grace left its stop to the next):
# no second signal, only the rest of the grace from that record's time, then KILL.
# Output: `exit CODE` when the attempt has an exit record by then.
set -u
launcher=$1 session=$2 dir=$3 reason=${4:-} stop_signal=${5:-TERM} grace=${6:-5}
# eq-tui include: _stop_args.sh
stop_args kill.sh "$stop_signal" "$grace"

pgid=$(tr -d ' \n' < "$dir/pgid" 2>/dev/null)
# eq-tui include: _proc_groups.sh
# eq-tui include: _tmux.sh
proc_groups $$
mine=$eq_pgid
case $pgid in ''|*[!0-9]*) pgid= ;; esac
if [ -n "$pgid" ] && { [ "$pgid" -le 1 ] || [ "$pgid" = "$mine" ]; }; then pgid=; fi
# Members of the group still running (zombies left for a reaper do not count).
running() {
    ps -eo pgid=,stat= 2>/dev/null | awk -v g="$pgid" '$1 == g && $2 !~ /^Z/ {n++} END {exit n == 0}'
}
top=$(tr -d ' \n' < "$dir/pid" 2>/dev/null)
case $top in ''|*[!0-9]*) top=- ;; esac
# The job's processes: the group's members but its wrapper, which leads the group (screen and
# tmux start it in a session of its own), and the wrapper's own children (the subshell that
# waits for the job, and tee, which writes the log). Once the wrapper is gone, all of them.
# The wrapper's `sh -c COMMAND` (the attempt's pid) is signalled only once it has no child: a
# shell that runs `python train.py` as its child (dash does not exec it) would die at once and
# the attempt record its exit while the job still saves; left alone it ends with the job's own
# status.
job_pids() {
    ps -eo pid=,ppid=,pgid=,stat= 2>/dev/null |
        awk -v g="$pgid" -v top="$top" '
            $3 == g && $4 !~ /^Z/ && $1 != g && $2 != g { job[$1] = 1; if ($2 == top) busy = 1 }
            END { for (p in job) if (p != top || !busy) print p }'
}
# poll_while TENTHS COMMAND...: until COMMAND fails, at most TENTHS tenths of a second
poll_while() {
    eq_left=$1
    shift
    while "$@" && [ "$eq_left" -gt 0 ]; do
        sleep 0.1 2>/dev/null || sleep 1
        eq_left=$((eq_left - 1))
    done
    ! "$@"
}
job_left() { [ -n "$(job_pids)" ]; }
# stop_record ENDED_BY RAN_OUT: the stop's fields, for the wrapper's exit record
stop_record() {
    printf 'stop %s\nsignal %s\ngrace %s\ngrace_ran_out %s\n' \
        "$stop_signal" "$1" "$grace" "$2" > "$dir/stop.tmp" && mv "$dir/stop.tmp" "$dir/stop"
}
ended_by=
ran_out=0
resumed=
if [ -n "$pgid" ]; then
    pids=$(job_pids)
    if [ -n "$pids" ] && [ -d "$dir" ]; then
        if [ -s "$dir/stop" ]; then
            # a stop already under way (its engine ended during the grace): the signal went
            # then, so it is not sent twice, and only what is left of the grace is waited,
            # timed from the stop's record by this host's clock
            sent=$(stat -c %Y "$dir/stop" 2>/dev/null || stat -f %m "$dir/stop" 2>/dev/null)
            now=$(date +%s)
            case $sent in ''|*[!0-9]*) sent=$now ;; esac
            grace_tenths=$((grace_tenths - (now - sent) * 10))
            [ "$grace_tenths" -gt 0 ] || grace_tenths=0
            resumed=1
        else
            # recorded before the signal: the job may be gone (and its exit written) at once
            stop_record "$stop_signal" 0
            # shellcheck disable=SC2086 # pids, one word each
            kill -s "$stop_signal" $pids 2>/dev/null
        fi
        ended_by=$stop_signal
        if ! poll_while "$grace_tenths" job_left; then
            ended_by=KILL ran_out=1
            stop_record KILL 1
            pids=$(job_pids)
            # shellcheck disable=SC2086
            [ -z "$pids" ] || kill -s KILL $pids 2>/dev/null
        fi
        # the wrapper records the exit and ends (its tee once the job's last output is in)
        poll_while 50 running
    else
        # nothing of the job runs: a wrapper that just ended it, or one still before its start
        poll_while 5 running
    fi
    running && kill -KILL "-$pgid" 2>/dev/null
fi
if [ -n "$reason" ] && [ -n "$ended_by" ] && [ -d "$dir" ]; then
    if [ -n "$resumed" ] && [ "$ran_out" = 1 ]; then
        how="SIG$stop_signal sent by an earlier stop, SIGKILL once its ${grace} s grace ran out"
    elif [ -n "$resumed" ]; then
        how="SIG$stop_signal sent by an earlier stop, the job ended within its ${grace} s grace"
    elif [ "$ran_out" = 1 ]; then
        how="SIG$stop_signal to the job, SIGKILL after the ${grace} s grace"
    else
        how="SIG$stop_signal to the job, which ended within the ${grace} s grace"
    fi
    printf '\neq-tui: %s (%s; process group %s)\n' "$reason" "$how" "$pgid" >> "$dir/log"
    if [ ! -e "$dir/exit" ]; then
        number=$(kill -l "$ended_by" 2>/dev/null)
        case $number in ''|*[!0-9]*) number=9 ;; esac
        ended=$(date +%s.%N 2>/dev/null)
        case $ended in *N*|"") ;; *) echo "$ended" > "$dir/end" ;; esac
        { echo "$((128 + number))"; cat "$dir/stop" 2>/dev/null; } > "$dir/exit.tmp" &&
            mv "$dir/exit.tmp" "$dir/exit"
    fi
fi

case $launcher in
    screen)
        screen -ls 2>/dev/null |
            sed -n 's/^[[:space:]]*\([0-9][0-9]*\.[^[:space:]]*\).*/\1/p' |
            while IFS= read -r id; do
                if [ "${id#*.}" = "$session" ]; then
                    screen -S "$id" -X quit >/dev/null 2>&1
                fi
            done
        ;;
    tmux) eq_tmux kill-session -t "=$session" 2>/dev/null ;;
esac
# its claims on its GPUs (_claims.sh), now that nothing of it holds them
# eq-tui include: _claims.sh
if [ -s "$dir/claims" ]; then
    read -r held < "$dir/claims"
    void=
    for f in $held; do
        claim_read "$f" && ! claim_live && void="$void $f"
    done
    # shellcheck disable=SC2086 # claim paths have no blanks
    [ -z "$void" ] || rm -f $void
fi
# how the attempt ended, as its exit record says (the wrapper's, or the one written above)
code=
[ -r "$dir/exit" ] && IFS= read -r code < "$dir/exit"
case $code in ''|*[!0-9]*) ;; *) echo "exit $code" ;; esac
# and its two ends by this host's clock (the wrapper's `start` and `end`, or the ones above)
for end in start end; do
    at=
    [ -r "$dir/$end" ] && IFS= read -r at < "$dir/$end"
    [ -z "$at" ] || echo "${end}ed $at"
done
[ -z "$ended_by" ] || echo "stopped $stop_signal $ended_by $ran_out"
exit 0
