# launch.sh LAUNCHER SESSION ATTEMPT_DIR [CLAIMS_DIR PROJECT TOKEN JOB ATTEMPT GPUS MIB KNOWN
#           [RULES RULES_SUM MAX_GPUS]]
# stdin: a line with the number N of environment lines, N lines of `export NAME='value'`,
# then the command text. The environment reaches the job through a fifo: never a file, never
# a command line. Exit 3: the attempt dir exists already (an attempt is never launched twice).
# With the claim arguments (_claims.sh, _claim_launch.sh) the attempt first takes its GPUs'
# claims: exit 10 when another engine's claims say they are not free for it, when it is
# another engine's fair turn (_fair_turns.sh), or when the lab's rules no longer allow it
# (_rules_launch.sh): nothing started, nothing left behind. A launch placed while its GPUs
# still drain waits for their memory first (_drain_wait.sh); exit 10 when it was not released.
set -u
launcher=$1 session=$2 dir=$3
claim_gpus=-
if [ "$#" -ge 11 ]; then
    claims_arg=$4 project=$5 token=$6 claim_job=$7 claim_attempt=$8 claim_gpus=$9
    shift 9
    claim_mib=$1 claim_known=$2 rules_arg=${3:--} rules_sum=${4:-?} rules_max=${5:--}
fi

mkdir -p "$(dirname "$dir")" 2>/dev/null
if ! mkdir "$dir" 2>/dev/null; then
    echo "eq-tui: attempt dir $dir already exists or cannot be created; not launching" >&2
    exit 3
fi
case $launcher in
    screen|tmux) command -v "$launcher" >/dev/null 2>&1 ||
        { echo "eq-tui: $launcher is not installed on this host" >&2; exit 4; } ;;
    *) echo "eq-tui: unknown launcher $launcher" >&2; exit 2 ;;
esac

not_starting="not launching"
# eq-tui include: _launch_request.sh
# eq-tui include: _tmux.sh
read_launch_request
if [ "$launcher" = tmux ]; then
    # a tmux server's panes get the server's environment (whoever started it, whenever), not
    # the launching client's: the wrapper starts from an empty one (env -i) and sources this
    # launch's own first, then the job's
    unset TMUX TMUX_PANE
    envtext="$(export -p)
$envtext"
fi
# the attempt's files first: a launch that waits for its GPUs to drain (below) has only its
# claims and its session left to start once they have
printf '%s' "$cmd" > "$dir/cmd" || fail_write cmd

cat > "$dir/run.sh" <<'WRAPPER'
# eq-tui include: _job_wrapper.sh
WRAPPER
[ -s "$dir/run.sh" ] || fail_write run.sh

mkfifo -m 600 "$dir/env.fifo" || exit 5
# refuse WHY: nothing started; the attempt dir is gone again (a later attempt may use it)
refuse() {
    rm -f "$dir/cmd" "$dir/run.sh" "$dir/env.fifo"
    rmdir "$dir" 2>/dev/null
    echo "eq-tui: claim refused: $1" >&2
    exit 10
}
# eq-tui include: _drain_wait.sh
if [ "$drain_gpus" != - ]; then
    drain_wait
    [ -z "$refused" ] || refuse "$refused"
fi
# eq-tui include: _proc_groups.sh
# eq-tui include: _claims.sh
# eq-tui include: _claim_launch.sh
# eq-tui include: _fair_turns.sh
# eq-tui include: _rules_launch.sh
taken=
if [ "$claim_gpus" != - ]; then
    claims_at "$claims_arg"
    locked=0
    claims_lock && locked=1
    rules_check "$rules_arg" "$rules_sum" "$rules_max" "$claim_gpus"
    [ -n "$refused" ] || claims_check "$claim_gpus" "$claim_mib" "$claim_known"
    [ -n "$refused" ] || claims_fair "$claim_gpus"
    [ -n "$refused" ] || claims_take "$claim_gpus" "$claim_mib" "$claim_job" "$claim_attempt" \
                                     "$session"
    [ "$locked" = 0 ] || claims_unlock
    [ -z "$refused" ] || refuse "$refused"
    # a launch that fails from here on leaves no claim behind (one the wrapper took is its own)
    # shellcheck disable=SC2086
    trap '[ "$?" = 0 ] || claims_drop $$ $taken' EXIT
    echo "$taken" > "$dir/claims"
fi
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
session_exists() {
    case $launcher in
        screen) screen -ls 2>/dev/null </dev/null |
                    sed -n 's/^[[:space:]]*[0-9][0-9]*\.\([^[:space:]]*\).*/\1/p' |
                    grep -qxF -e "$session" ;;
        tmux) eq_tmux has-session -t "=$session" 2>/dev/null </dev/null ;;
    esac
}
start_session() {
    case $launcher in
        screen) screen -dmS "$session" sh "$dir/run.sh" "$dir" ;;
        tmux) eq_tmux new-session -d -s "$session" \
                  "exec env -i sh $(quote "$dir/run.sh") $(quote "$dir")" ;;
    esac
}
start_session
status=$?
# a tmux server that is exiting (its last session just ended) drops a new client: "server
# exited unexpectedly". A fresh server takes the session: tried again, only while it did not
# start (never twice)
tries=1
while [ "$status" -ne 0 ] && [ "$launcher" = tmux ] && [ "$tries" -lt 3 ] && ! session_exists; do
    sleep 0.2
    start_session
    status=$?
    tries=$((tries + 1))
done
if [ "$status" -ne 0 ]; then
    rm -f "$dir/env.fifo"
    echo "eq-tui: $launcher could not start session $session (exit $status)" >&2
    exit 6
fi
# The wrapper opens the fifo as soon as it runs: that is the proof the session started. The
# launch waits for that blocked, not polling: a `sleep 0.1` loop ran a process every tenth of a
# second per launch just when a sweep's first wave starts every session at once. A watchdog
# looks once a second, and only at a wrapper that is slow to start.
( printf '%s' "$envtext" > "$dir/env.fifo" ) &
writer=$!
why="$dir/.launch-failed"
(
    looked=0
    while sleep 1; do
        kill -0 "$writer" 2>/dev/null || exit 0
        looked=$((looked + 1))
        # a session that is gone while the environment is still unread died before its
        # wrapper ran
        if [ "$looked" -ge 20 ]; then
            echo "session $session did not start its wrapper within 20 s" > "$why"
        elif ! session_exists && [ -p "$dir/env.fifo" ] && [ ! -e "$dir/pgid" ]; then
            echo "session $session ended before its wrapper started" > "$why"
        else
            continue
        fi
        kill "$writer" 2>/dev/null
        exit 0
    done
) </dev/null >/dev/null 2>&1 &
watchdog=$!
wait "$writer"
wrote=$?
kill "$watchdog" 2>/dev/null
if [ "$wrote" -eq 0 ]; then
    # the watchdog may have written why just as the wrapper took the environment after all: a
    # launch that went leaves no failure behind (a test, not a process, when there is none)
    [ ! -e "$why" ] || rm -f "$why"
else
    rm -f "$dir/env.fifo"
    if [ -s "$why" ]; then
        echo "eq-tui: $(cat "$why")" >&2
        rm -f "$why"
    else
        echo "eq-tui: the environment could not be handed to session $session" >&2
    fi
    exit 7
fi
