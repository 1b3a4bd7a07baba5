# reap.sh ATTEMPT_DIR JOB ATTEMPT PROJECT RUN_DIR ENDED GRACE [PID...]
# Leftover memory: of the PIDs (processes holding memory on an ended attempt's GPUs), end those
# that belong to that attempt: TERM, then KILL after GRACE seconds. A process is the attempt's
# when its environment carries the attempt's EQ_JOB_ID, EQ_ATTEMPT, EQ_PROJECT and EQ_RUN_DIR,
# or (environment cleared or unreadable) when it is in the attempt's process group or session
# and started no later than the attempt ended (ENDED, epoch seconds: a recycled group number
# belongs to a process started after ours were all gone). A process whose environment names
# another job or attempt, or anyone else's, is never touched.
# Output, one line each: `R<TAB>pid<TAB>user<TAB>action<TAB>hex(command)`, action `term`
# (ended on TERM), `kill` (needed KILL) or `alive` (survived even that).
set -u
set -f
dir=$1 job=$2 attempt=$3 project=$4 run_dir=$5 ended=$6 grace=$7
shift 7
tab=$(printf '\t')
[ -d /proc/self ] || exit 0  # the rules need /proc; without it nothing is ours to end
pgid=
if [ -r "$dir/pgid" ]; then IFS= read -r pgid < "$dir/pgid" || :; fi
case $pgid in ''|*[!0-9]*) pgid= ;; esac
btime=$(awk '/^btime/ { print $2 }' /proc/stat 2>/dev/null)
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
mine=$$
hex() { od -An -v -tx1 | tr -d ' \n'; }

has() { printf '%s\n' "$environ" | grep -Fqx -- "$1"; }
ours() {
    pid=$1
    [ "$pid" != "$mine" ] && [ -r "/proc/$pid/stat" ] || return 1
    # a process already exiting (a zombie, no command line) is not a leftover
    case $(cat "/proc/$pid/stat" 2>/dev/null) in *") Z"*) return 1 ;; esac
    [ -n "$(head -c 64 "/proc/$pid/cmdline" 2>/dev/null | tr -d '\0')" ] || return 1
    environ=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null) || environ=
    if [ -n "$environ" ]; then
        if has "EQ_JOB_ID=$job" && has "EQ_ATTEMPT=$attempt" && has "EQ_PROJECT=$project" &&
                has "EQ_RUN_DIR=$run_dir"; then
            return 0
        fi
        case $environ in *EQ_JOB_ID=*) return 1 ;; esac  # another job's or attempt's
    fi
    [ -n "$pgid" ] && [ -n "$btime" ] || return 1
    read -r stat < "/proc/$pid/stat" 2>/dev/null || return 1
    set -- ${stat##*) }
    [ "$3" = "$pgid" ] || [ "$4" = "$pgid" ] || return 1
    awk -v b="$btime" -v t="${20}" -v hz="$hz" -v e="$ended" \
        'BEGIN { exit !(b + t / hz <= e + 1) }'
}

targets=
for pid in "$@"; do
    case $pid in ''|*[!0-9]*) continue ;; esac
    if ours "$pid"; then targets="$targets $pid"; fi
done
[ -n "$targets" ] || exit 0

for pid in $targets; do
    user=$(ps -o user= -p "$pid" 2>/dev/null | tr -d ' ')
    args=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-300)
    eval "user_$pid=\${user:-?}"
    eval "args_$pid=\$args"
    kill -TERM "$pid" 2>/dev/null
done
alive() { [ -e "/proc/$1" ] && ! case $(cat "/proc/$1/stat" 2>/dev/null) in *") Z"*) true ;; *) false ;; esac; }
waited=0
limit=$(awk -v g="$grace" 'BEGIN { printf "%d", g * 10 }')
while [ "$waited" -lt "$limit" ]; do
    left=0
    for pid in $targets; do if alive "$pid"; then left=1; fi; done
    [ "$left" = 1 ] || break
    sleep 0.1 2>/dev/null || sleep 1
    waited=$((waited + 1))
done
for pid in $targets; do
    action=term
    if alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null
        action=kill
        n=0
        while alive "$pid" && [ "$n" -lt 20 ]; do sleep 0.1 2>/dev/null || sleep 1; n=$((n + 1)); done
        if alive "$pid"; then action=alive; fi
    fi
    eval "user=\$user_$pid; args=\$args_$pid"
    echo "R${tab}${pid}${tab}${user}${tab}${action}${tab}$(printf '%s' "$args" | hex)"
done
