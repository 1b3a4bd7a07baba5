# _fair_turns.sh: included by launch.sh after _claims.sh, _proc_groups.sh and _claim_launch.sh
# (mtime_of, claim_usage); it reads the want files _claims.sh writes. Fair turns, by memory: a
# freed GPU, or the room a job freed on a GPU that jobs share, goes first to the waiting engine
# that holds the least of this host's GPU memory, when it could use it.
#
# claims_fair GPUS: when another engine waits for GPUs here (its want file is fresh: written by a
# probe within 3 of its polls + 10 s), could use GPUS (its want file says what its waiting jobs
# need, see fair_usable) and holds less of this host's GPU memory than we do (by the live claims:
# each claim's estimate, a GPU claimed whole its whole memory), the launch yields ($refused):
# the GPUs are its turn. For at most 3 of its polls + 10 s while it takes nothing (the y.* file
# says what it held when its turn began: an engine that could use the GPUs but does not take
# them must not keep them idle). Costs nothing
# while no other engine waits here: no reading, no claim read.
claims_fair() {
    eq_marker="$claims/y.$eq_user.$project.$token"
    eq_wants=
    for eq_w in "$claims"/w.*; do
        [ -f "$eq_w" ] && [ "${eq_w##*/}" != "w.$eq_user.$project.$token" ] &&
            eq_wants="$eq_wants $eq_w"
    done
    if [ -z "$eq_wants" ]; then
        [ ! -e "$eq_marker" ] || rm -f "$eq_marker"
        return 0
    fi
    eq_old_ifs=$IFS
    IFS=,
    # shellcheck disable=SC2086 # a comma list of GPU indices
    set -- $1
    IFS=$eq_old_ifs
    eq_launch_gpus=$*
    # the live claims here: " engine/gpu/mib/pid ..." (mib '-': the GPU whole)
    eq_live=" "
    for eq_file in "$claims"/c.*; do
        [ -f "$eq_file" ] && claim_read "$eq_file" && claim_live || continue
        eq_live="$eq_live$c_user.$c_project.$c_token/$c_gpu/$c_mib/$c_pid "
    done
    fair_readings
    held_mib "$eq_user.$project.$token"
    eq_mine=$eq_n
    eq_now=$(date +%s)
    eq_cap=-1
    eq_turn=
    eq_progress=  # what the engines whose turn it is hold: the marker says it
    for eq_w in $eq_wants; do
        w_tag= w_gpus= w_count= w_share= w_alone=
        read -r w_tag w_user w_project w_token w_poll w_gpus w_count w_share w_alone w_rest \
            < "$eq_w" 2>/dev/null
        [ "$w_tag" = eqwant1 ] && [ -n "$w_gpus" ] || continue
        case $w_poll in ''|*[!0-9]*) w_poll=2 ;; esac
        mtime_of "$eq_w" || continue
        [ $((eq_now - eq_mtime)) -le $((3 * w_poll + 10)) ] || continue
        held_mib "$w_user.$w_project.$w_token"
        [ "$eq_n" -lt "$eq_mine" ] || continue
        fair_usable || continue
        eq_progress="$eq_progress $w_user.$w_project.$w_token:$eq_n"
        eq_turn="$w_user's $w_project holds $eq_n MiB of GPU memory here, waits and could use"
        eq_turn="$eq_turn GPU $(echo "$eq_launch_gpus" | tr ' ' ,); we hold $eq_mine MiB"
        [ $((3 * w_poll + 10)) -gt "$eq_cap" ] && eq_cap=$((3 * w_poll + 10))
    done
    if [ -z "$eq_turn" ]; then
        [ ! -e "$eq_marker" ] || rm -f "$eq_marker"
        return 0
    fi
    eq_marked=
    [ ! -e "$eq_marker" ] || read -r eq_marked < "$eq_marker" 2>/dev/null
    if [ "$eq_marked" != "${eq_progress# }" ]; then
        # a first turn, or the waiting engine took something since: its turn starts now
        ( umask 022; echo "${eq_progress# }" > "$eq_marker" ) 2>/dev/null
    elif mtime_of "$eq_marker" && [ $((eq_now - eq_mtime)) -ge "$eq_cap" ]; then
        rm -f "$eq_marker"  # its turn is over: it took nothing
        return 0
    fi
    refused="fair turn: $eq_turn"
}

# fair_readings: $eq_readings (index, uuid, used, total per GPU) and $eq_apps (pid, uuid, MiB
# per GPU process), once per launch; empty where nvidia-smi does not answer
fair_readings() {
    eq_readings=$(nvidia-smi --query-gpu=index,uuid,memory.used,memory.total \
                  --format=csv,noheader,nounits 2>/dev/null </dev/null) || eq_readings=
    eq_apps=$(nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory \
              --format=csv,noheader,nounits 2>/dev/null </dev/null) || eq_apps=
}

# gpu_reading GPU: $eq_uuid $eq_used $eq_total of that GPU; 1 when nvidia-smi did not say
gpu_reading() {
    while IFS=', ' read -r eq_index eq_uuid eq_used eq_total eq_rest; do
        [ "$eq_index" = "$1" ] || continue
        case $eq_used$eq_total in ''|*[!0-9]*) return 1 ;; esac
        return 0
    done <<READINGS
$eq_readings
READINGS
    return 1
}

# held_mib ENGINE: $eq_n, the GPU memory the engine's live claims hold here ($eq_live): each
# claim's estimate; a GPU claimed whole, its memory (64 GiB where nvidia-smi does not say)
held_mib() {
    eq_n=0
    for eq_pair in $eq_live; do
        case $eq_pair in "$1"/*) ;; *) continue ;; esac
        eq_rest=${eq_pair#*/}
        eq_g=${eq_rest%%/*} eq_rest=${eq_rest#*/}
        eq_m=${eq_rest%%/*}
        if [ "$eq_m" = - ]; then
            if gpu_reading "$eq_g"; then eq_m=$eq_total; else eq_m=65536; fi
        fi
        eq_n=$((eq_n + eq_m))
    done
}


# room_for_them GPU: $eq_room, the memory the GPU would have free for the waiting engine if we
# put nothing more on it (its free memory, less what claims hold and have not allocated yet,
# plus what our own claims there hold: they end in their time, and we would not refill them);
# $eq_strangers, how many claims of other engines are on it. 1 when nvidia-smi did not say.
room_for_them() {
    gpu_reading "$1" || return 1
    eq_room=$((eq_total - eq_used))
    eq_strangers=0
    for eq_pair in $eq_live; do
        eq_engine=${eq_pair%%/*} eq_rest=${eq_pair#*/}
        [ "${eq_rest%%/*}" = "$1" ] || continue
        eq_rest=${eq_rest#*/}
        eq_m=${eq_rest%%/*} eq_pid=${eq_rest#*/}
        claim_usage "$eq_pid" "$eq_uuid"
        if [ "$eq_engine" = "$eq_user.$project.$token" ]; then
            eq_room=$((eq_room + eq_has))  # what it has not allocated was never taken off
            continue
        fi
        eq_strangers=$((eq_strangers + 1))
        [ "$eq_m" = - ] && { eq_room=0; continue; }
        [ "$eq_m" -gt "$eq_has" ] && eq_room=$((eq_room - eq_m + eq_has))
    done
}

# fair_usable: could the waiting engine just read (w_gpus: the GPUs it may use here, a comma
# list or 'all'; w_count: the fewest GPUs a waiting job of its needs; w_share: the least memory
# one of its jobs that share a GPU needs on each, margin included, '-' none; w_alone: its free
# threshold when one of its jobs wants GPUs alone, '-' none) use the GPUs of this launch
# ($eq_launch_gpus)? Each one it may use counts when the room we would leave it there fits a job
# that shares, or the GPU would be free for a job alone (no other engine's claim, its memory
# not ours below the threshold); it needs w_count of them. A want file without those fields
# (an older eq-tui, or needs not known) may use any GPU it may use.
fair_usable() {
    eq_fits=0
    for eq_g in $eq_launch_gpus; do
        case ",$w_gpus," in ,all,|*",$eq_g,"*) ;; *) continue ;; esac
        case $w_count in ''|-) eq_fits=$((eq_fits + 1)); continue ;; esac
        room_for_them "$eq_g" || { eq_fits=$((eq_fits + 1)); continue; }
        case $w_share in ''|*[!0-9]*) ;; *)
            if [ "$eq_room" -ge "$w_share" ]; then eq_fits=$((eq_fits + 1)); continue; fi ;;
        esac
        case $w_alone in ''|*[!0-9]*) ;; *)
            if [ "$eq_strangers" = 0 ] && [ $((eq_total - eq_room)) -lt "$w_alone" ]; then
                eq_fits=$((eq_fits + 1))
            fi ;;
        esac
    done
    case $w_count in ''|*[!0-9]*|0) w_count=1 ;; esac
    [ "$eq_fits" -ge "$w_count" ]
}
