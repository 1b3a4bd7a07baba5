# _drain_wait.sh: included by launch.sh. An attempt the engine placed while its GPUs' last job
# of ours was still releasing its memory (the engine's DrainWait) waits here, before it takes
# any claim, until each of $drain_gpus reads below $drain_below MiB: the next job starts as the
# memory goes, with no round trip to the engine between. It looks every $drain_every seconds,
# at most $drain_rounds more times; then $refused says which GPUs still hold memory, and the
# engine places the job again (nothing started, no attempt spent). With no nvidia-smi reading
# the engine's decision stands, as it does for a launch that does not wait.
drain_wait() {
    refused=
    eq_round=0
    while :; do
        eq_readings=$(nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits \
                      2>/dev/null </dev/null) || return 0
        eq_busy=
        while IFS=', ' read -r eq_g eq_used eq_rest; do
            case ",$drain_gpus," in *",$eq_g,"*) ;; *) continue ;; esac
            case $eq_used in
                ''|*[!0-9]*) eq_busy="$eq_busy, GPU $eq_g has no memory reading" ;;
                *) [ "$eq_used" -lt "$drain_below" ] ||
                       eq_busy="$eq_busy, GPU $eq_g holds $eq_used MiB" ;;
            esac
        done <<READINGS
$eq_readings
READINGS
        [ -z "$eq_busy" ] && return 0
        if [ "$eq_round" -ge "$drain_rounds" ]; then
            refused="the memory of the GPUs' last job was not released in time (${eq_busy#, })"
            return 0
        fi
        sleep "$drain_every" 2>/dev/null || sleep 1
        eq_round=$((eq_round + 1))
    done
}
