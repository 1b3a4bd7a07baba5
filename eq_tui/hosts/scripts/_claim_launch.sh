# _claim_launch.sh: included by launch.sh after _claims.sh. A launch takes its GPUs' claims
# under the host's lock, after checking that they are still free for it:
#   - no other engine's live claim on a GPU it wants alone (MIB '-'), and no other engine's
#     claim on it that wants the GPU alone;
#   - where it shares a GPU with other engines' jobs: the GPU's free memory, less what their
#     claims hold and have not allocated yet, still fits its estimate; and when one of those
#     claims is news the engine has not weighed (taken since it placed the job: not in KNOWN),
#     less what this engine's own claims there have not allocated yet too (the engine counted
#     them, not beside the news).
# Refused: $refused says why, nothing is taken, and the engine places the job again.

# claims_lock: the host's lock (fd 9); 1 when it could not be had (the launch goes ahead: a
# lock nobody can take must not stop every queue on the host)
claims_lock() {
    [ -d "$claims" ] || mkdir -p -m 1777 "$claims" 2>/dev/null
    if [ ! -e "$claims/lock" ]; then
        : > "$claims/lock" 2>/dev/null && chmod 644 "$claims/lock" 2>/dev/null
    fi
    if command -v flock >/dev/null 2>&1; then
        [ -r "$claims/lock" ] || return 1
        exec 9<"$claims/lock"
        flock -w 30 9 2>/dev/null </dev/null
        return
    fi
    # no flock (not Linux): a lock directory, taken by whoever makes it
    eq_waited=0
    while ! mkdir "$claims/lock.d" 2>/dev/null; do
        [ "$eq_waited" -ge 300 ] && return 1
        sleep 0.1 2>/dev/null || sleep 1
        eq_waited=$((eq_waited + 1))
    done
    eq_lockdir=1
}

claims_unlock() {
    if [ -n "${eq_lockdir:-}" ]; then
        rmdir "$claims/lock.d" 2>/dev/null
        eq_lockdir=
    else
        exec 9<&-
    fi
}

# claims_check GPUS MIB KNOWN: may this attempt (project $project, token $token) take GPUS
# (comma list) holding MIB on each ('-': alone)? KNOWN: the other engines' claims (file names,
# comma list) the engine counted when it placed the job. Sets $refused when not.
claims_check() {
    refused=
    eq_shared=  # " gpu:pid:mib" of the claims its memory must fit beside
    eq_own=  # the same, for this engine's own claims on those GPUs
    eq_news=  # a GPU where another engine claimed since the engine looked
    eq_old_ifs=$IFS
    IFS=,
    for eq_gpu in $1; do
        IFS=$eq_old_ifs
        for eq_file in "$claims"/c."$eq_gpu".*; do
            [ -f "$eq_file" ] && claim_read "$eq_file" || continue
            claim_live || continue
            if [ "$c_user.$c_project.$c_token" = "$eq_user.$project.$token" ]; then
                [ "$c_mib" = - ] || eq_own="$eq_own $eq_gpu:$c_pid:$c_mib"
                continue
            fi
            eq_who="$c_user's $c_project/$c_job"
            if [ "$2" = - ]; then
                refused="GPU $eq_gpu is claimed by $eq_who"
                return 0
            elif [ "$c_mib" = - ]; then
                refused="GPU $eq_gpu is claimed whole by $eq_who"
                return 0
            fi
            eq_shared="$eq_shared $eq_gpu:$c_pid:$c_mib"
            case ",$3," in *",${eq_file##*/},"*) ;; *) eq_news="$eq_news $eq_gpu" ;; esac
        done
        IFS=,
    done
    IFS=$eq_old_ifs
    [ -z "$eq_shared" ] && return 0
    for eq_gpu in $eq_news; do  # news: our own claims there count beside it
        for eq_claim in $eq_own; do
            case $eq_claim in "$eq_gpu":*) eq_shared="$eq_shared $eq_claim" ;; esac
        done
    done
    claims_fit "$2"
    if [ -n "$refused" ] && [ -n "$eq_news" ]; then
        refused="$refused (claimed since the engine looked)"
    fi
}

# claim_usage PID UUID: $eq_has, what the processes of the claim held by PID use on that GPU
claim_usage() {
    eq_has=0
    while IFS=', ' read -r eq_app eq_app_uuid eq_app_mib eq_x; do
        [ "$eq_app_uuid" = "$2" ] || continue
        case $eq_app$eq_app_mib in ''|*[!0-9]*) continue ;; esac
        proc_groups "$eq_app" || continue
        if [ "$eq_pgid" = "$1" ] || [ "$eq_sid" = "$1" ]; then
            eq_has=$((eq_has + eq_app_mib))
        fi
    done <<APPS
$eq_apps
APPS
}

# claims_fit MIB: each GPU in $eq_shared (" gpu:pid:mib" per claim) has MIB free beside what
# those claims have not allocated yet; nvidia-smi's word, when it has one
claims_fit() {
    eq_readings=$(nvidia-smi --query-gpu=index,uuid,memory.used,memory.total \
                  --format=csv,noheader,nounits 2>/dev/null </dev/null) || return 0
    eq_apps=$(nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory \
              --format=csv,noheader,nounits 2>/dev/null </dev/null) || eq_apps=
    while IFS=', ' read -r eq_index eq_uuid eq_used eq_total eq_rest; do
        case " $eq_shared" in *" $eq_index:"*) ;; *) continue ;; esac
        case $eq_used$eq_total in ''|*[!0-9]*) continue ;; esac
        eq_pending=0
        for eq_claim in $eq_shared; do
            case $eq_claim in "$eq_index":*) ;; *) continue ;; esac
            eq_rest=${eq_claim#*:}
            eq_pid=${eq_rest%%:*} eq_mib=${eq_rest#*:}
            claim_usage "$eq_pid" "$eq_uuid"
            [ "$eq_mib" -gt "$eq_has" ] && eq_pending=$((eq_pending + eq_mib - eq_has))
        done
        eq_free=$((eq_total - eq_used - eq_pending))
        if [ "$eq_free" -lt "$1" ]; then
            refused="GPU $eq_index has $eq_free MiB free beside the claims on it; the job needs $1"
            return 0
        fi
    done <<READINGS
$eq_readings
READINGS
}

# claims_take GPUS MIB JOB ATTEMPT SESSION: this launch's claims (held by this process until
# the wrapper takes them over); their paths in $taken
claims_take() {
    proc_start $$
    taken=
    eq_old_ifs=$IFS
    IFS=,
    for eq_gpu in $1; do
        IFS=$eq_old_ifs
        eq_file="$claims/c.$eq_gpu.$eq_user.$project.$token.$3.a$4"
        claim_write "$eq_file" "$eq_gpu" "$eq_user" "$project" "$token" "$3" "$4" "$$" \
            "$eq_pstart" "$2" "$5" && taken="$taken $eq_file"
        IFS=,
    done
    IFS=$eq_old_ifs
}

# mtime_of FILE: $eq_mtime, its last change (epoch seconds); 1 when it cannot be read
mtime_of() {
    eq_mtime=$(stat -c %Y "$1" 2>/dev/null || stat -f %m "$1" 2>/dev/null) || return 1
    case $eq_mtime in ''|*[!0-9]*) return 1 ;; esac
}

