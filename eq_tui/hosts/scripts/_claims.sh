# _claims.sh: claims on a host's GPUs, shared by every eq-tui engine that launches there, of
# any user (included by launch.sh, probe.sh and the attempt wrapper; hosts/claims.py reads
# what the probe reports). The claims directory ($claims) is sticky and world-writable, like
# /tmp, and holds:
#   lock            the host's lock (flock), held only while a launch checks and takes claims
#   w.USER.PROJECT.TOKEN
#                   an engine with jobs waiting for GPUs here (fair turns, _fair_turns.sh):
#                   eqwant1 USER PROJECT TOKEN POLL GPUS COUNT SHARE ALONE  (its poll in whole
#                   seconds; the GPUs it may use: a comma list or 'all'; what its waiting jobs
#                   need: the fewest GPUs one needs, the least MiB one that shares a GPU needs
#                   on each, the free threshold for one that wants its GPUs alone, '-' none or
#                   not known), rewritten by each of its probes
#   y.USER.PROJECT.TOKEN
#                   since when that engine has let freed GPUs go to engines holding less (what
#                   they held then: a turn that takes something starts again)
#   c.GPU.USER.PROJECT.TOKEN.JOB.aN
#                   one claim on one GPU, one line:
#                   eqclaim1 GPU USER PROJECT TOKEN JOB ATTEMPT PID PSTART MIB SESSION
#                   MIB is the job's estimate on that GPU, '-' when it takes the GPU alone.
#                   PID is the process that holds the claim (the launch, then from before the
#                   launch returns the attempt's wrapper) and PSTART when that process started
#                   (clock ticks after boot, from /proc; '-' without /proc): a claim whose
#                   process is gone, or is another process under the same pid (after a reboot),
#                   is void.
# Claims are advice between colleagues: nothing stops a process that never asked.

# claims_at PATH: $claims, the host entry's directory ('-': $EQ_TUI_CLAIMS, else
# /tmp/eq-tui-claims); $eq_user, who we are here (a name that can go in a file name)
claims_at() {
    case $1 in ''|-) claims=${EQ_TUI_CLAIMS:-/tmp/eq-tui-claims} ;; *) claims=$1 ;; esac
    eq_user=${USER:-${LOGNAME:-}}
    [ -n "$eq_user" ] || eq_user=$(id -un 2>/dev/null </dev/null)
    case $eq_user in ''|*[!A-Za-z0-9_.-]*) eq_user=uid$(id -u 2>/dev/null </dev/null) ;; esac
}

# proc_start PID: $eq_pstart, when the process started ('-' without /proc); 1 when it is gone
# (a zombie holds nothing either)
proc_start() {
    eq_pstart=-
    if [ -d /proc/self ]; then
        eq_stat=
        read -r eq_stat < "/proc/$1/stat" 2>/dev/null || return 1
        # after the command's closing paren: state ppid ... starttime is the 20th
        set -- ${eq_stat##*) }
        [ "$#" -ge 20 ] || return 1
        case $1 in Z*) return 1 ;; esac
        eq_pstart=${20}
        return 0
    fi
    ps -p "$1" -o pid= >/dev/null 2>&1 </dev/null
}

# claim_read FILE: its fields into c_gpu c_user c_project c_token c_job c_attempt c_pid
# c_pstart c_mib c_session; 1 for a file that is not a claim (or is half written)
claim_read() {
    c_tag= c_session=
    read -r c_tag c_gpu c_user c_project c_token c_job c_attempt c_pid c_pstart c_mib \
        c_session c_rest < "$1" 2>/dev/null
    [ "$c_tag" = eqclaim1 ] && [ -n "$c_session" ] || return 1
    case $c_pid$c_gpu$c_attempt in *[!0-9]*) return 1 ;; esac
    case $c_mib in -) ;; ''|*[!0-9]*) return 1 ;; esac
    return 0
}

# claim_live: the claim just read is held by its process, still running
claim_live() {
    proc_start "$c_pid" || return 1
    [ "$c_pstart" = - ] || [ "$eq_pstart" = - ] || [ "$c_pstart" = "$eq_pstart" ]
}

# claim_write FILE GPU USER PROJECT TOKEN JOB ATTEMPT PID PSTART MIB SESSION: readable by
# every user, whatever our umask
claim_write() {
    ( umask 022; eq_to=$1; shift
      printf 'eqclaim1 %s %s %s %s %s %s %s %s %s %s\n' "$@" > "$eq_to" )
}

# claims_own PID CLAIM_FILE...: the claims now name process PID (written whole, then renamed:
# a reader never sees half a claim)
claims_own() {
    eq_owner=$1
    shift
    proc_start "$eq_owner" || return 1
    for eq_file; do
        claim_read "$eq_file" || continue
        eq_tmp="${eq_file%/*}/.t.${eq_file##*/}"
        claim_write "$eq_tmp" "$c_gpu" "$c_user" "$c_project" "$c_token" "$c_job" \
            "$c_attempt" "$eq_owner" "$eq_pstart" "$c_mib" "$c_session" &&
            mv -f "$eq_tmp" "$eq_file"
    done
}

# claims_drop PID CLAIM_FILE...: remove those of the claims that process PID still holds
claims_drop() {
    eq_owner=$1
    shift
    eq_gone=
    for eq_file; do
        claim_read "$eq_file" && [ "$c_pid" = "$eq_owner" ] && eq_gone="$eq_gone $eq_file"
    done
    # shellcheck disable=SC2086 # claim paths are ours: no blanks
    [ -z "$eq_gone" ] || rm -f $eq_gone
}

# claims_want PROJECT:TOKEN:FLAG:POLL:GPUS:COUNT:SHARE:ALONE: this engine's want file, written
# by its probes while it has jobs waiting for GPUs here (each write is its mtime: how fresh it
# is), removed once it has none
claims_want() {
    w_project=${1%%:*} w_rest=${1#*:}
    w_token=${w_rest%%:*} w_rest=${w_rest#*:}
    w_flag=${w_rest%%:*} w_rest=${w_rest#*:}
    w_poll=${w_rest%%:*} w_rest=${w_rest#*:}
    w_gpus=${w_rest%%:*} w_rest=${w_rest#*:}
    w_count=${w_rest%%:*} w_rest=${w_rest#*:}
    w_share=${w_rest%%:*} w_alone=${w_rest#*:}
    w_file="$claims/w.$eq_user.$w_project.$w_token"
    if [ "$w_flag" = 1 ]; then
        w_line="eqwant1 $eq_user $w_project $w_token $w_poll $w_gpus $w_count $w_share $w_alone"
        [ -d "$claims" ] || mkdir -p -m 1777 "$claims" 2>/dev/null </dev/null
        ( umask 022; printf '%s\n' "$w_line" > "$w_file" ) 2>/dev/null
    else
        rm -f "$w_file" 2>/dev/null </dev/null
    fi
}
