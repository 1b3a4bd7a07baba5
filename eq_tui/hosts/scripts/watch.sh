# watch.sh INTERVAL THRESHOLD_MIB QUERY_GPUS LIFETIME_S [DRAIN_INTERVAL]
# stdin (read to EOF before watching):
#   A key attempt_dir gpus    an attempt to watch for its exit record; gpus (a comma list, or
#                             - for none) are watched for their release once it exits
#   G gpu                     a GPU whose memory we wait to see released
# Output, one line per fact, as it happens:
#   R                         ready (requests read)
#   X key                     the attempt's exit record appeared (its GPUs are then watched)
#   F gpu used_mib            a watched GPU's memory.used is below the threshold
#   E message                 nvidia-smi failed; GPUs are no longer watched (the probe decides)
#   H                         heartbeat (a closed channel ends us at the next write)
#   Q done|lifetime           the last line: nothing is left to watch, or LIFETIME_S is up
# It checks exit records (cheap file tests) every INTERVAL seconds (DRAIN_INTERVAL while a GPU
# drains: the next job waits on that reading) and runs nvidia-smi only
# while a GPU is being watched. It exits after LIFETIME_S; the engine starts a fresh one.
set -u
set -f
interval=$1 threshold=$2 query_gpus=$3 lifetime=$4 drain_interval=${5:-$1}
tab=$(printf '\t')
nl='
'

attempts=
draining=' '
while IFS="$tab" read -r kind a b c; do
    case $kind in
        A) attempts="$attempts$a$tab$b$tab$c$nl" ;;
        G) case $draining in *" $a "*) ;; *) draining="$draining$a " ;; esac ;;
    esac
done
echo R

watch_gpus_of() {
    [ "$1" = - ] && return 0
    old_ifs=$IFS
    IFS=,
    for g in $1; do
        case $draining in *" $g "*) ;; *) draining="$draining$g " ;; esac
    done
    IFS=$old_ifs
}

started=$(date +%s)
beat=$started
round=0
while :; do
    remaining=
    exited=
    while IFS="$tab" read -r key dir gpus; do
        [ -n "$key" ] || continue
        if [ -e "$dir/exit" ]; then
            exited="$exited$key$tab$gpus$nl"
        else
            remaining="$remaining$key$tab$dir$tab$gpus$nl"
        fi
    done <<EOF
$attempts
EOF
    attempts=$remaining
    while IFS="$tab" read -r key gpus; do
        [ -n "$key" ] || continue
        echo "X$tab$key" || exit 0
        [ "$query_gpus" = 1 ] && watch_gpus_of "$gpus"
    done <<EOF
$exited
EOF
    if [ "$query_gpus" = 1 ] && [ "$draining" != ' ' ]; then
        if readings=$(nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits \
                      2>&1 </dev/null); then
            # each reading read by the shell itself (an awk per GPU per round adds up while
            # many GPUs drain on a busy host); a GPU with no reading keeps draining
            still=' '
            read_gpus=' '
            while IFS=', ' read -r g used rest; do
                case $draining in *" $g "*) ;; *) continue ;; esac
                read_gpus="$read_gpus$g "
                case $used in
                    ''|*[!0-9]*) still="$still$g " ;;
                    *) if [ "$used" -lt "$threshold" ]; then
                           echo "F$tab$g$tab$used" || exit 0
                       else
                           still="$still$g "
                       fi ;;
                esac
            done <<EOF
$readings
EOF
            for g in $draining; do
                case $read_gpus in *" $g "*) ;; *) still="$still$g " ;; esac
            done
            draining=$still
        else
            echo "E${tab}nvidia-smi: $(printf '%s' "$readings" | head -n 1)" || exit 0
            draining=' '
        fi
    fi
    if [ -z "$attempts" ] && [ "$draining" = ' ' ]; then echo "Q${tab}done"; exit 0; fi
    # the clock is read every 4th round only: on a host with many watchers (and on a test
    # bed where every host shares two cores) a `date` per round is most of our cost
    round=$((round + 1))
    if [ $((round % 4)) -eq 0 ]; then
        now=$(date +%s)
        if [ $((now - beat)) -ge 5 ]; then
            echo H || exit 0
            beat=$now
        fi
        if [ $((now - started)) -ge "$lifetime" ]; then echo "Q${tab}lifetime"; exit 0; fi
    fi
    # a GPU draining: the next job waits on its reading, so it is looked at more often
    if [ "$draining" != ' ' ]; then pause=$drain_interval; else pause=$interval; fi
    sleep "$pause" 2>/dev/null || sleep 1
done
