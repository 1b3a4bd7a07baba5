# probe.sh CWD SESSION_PREFIX QUERY_GPUS BOUNDARY [CORES [CLAIMS_DIR [WANT [RULES]]]]
# QUERY_GPUS: 0 none, 1 GPUs and their processes, 2 also their health (ECC, pending pages).
# CORES: 1 also counts the host's CPU cores. CLAIMS_DIR ('-': the default): the live claims of
# every engine on this host's GPUs (_claims.sh), one line each:
#   FILE GPU USER PROJECT TOKEN JOB ATTEMPT PID MIB SESSION
# and our own void ones (their process is gone) are removed. WANT (PROJECT:TOKEN:FLAG:POLL:GPUS:
# COUNT:SHARE:ALONE, '-' none; claims.want_arg): FLAG 1, this engine has jobs waiting for GPUs
# here (its want file, for fair turns, is written); 0, it has none (its want file goes). With
# CLAIMS_DIR, also `user NAME` (who we are here) and, when other engines' want files are there,
# a `wants` section: the fresh ones' `USER PROJECT TOKEN`. RULES ('-': $EQ_TUI_RULES, else
# /etc/eq-tui/rules.yaml): the lab's rules file, when there is one, as a `rules` section (its
# cksum in `rules_sum`), and the host's clock (`HH:MM WEEKDAY`, a `clock` section) when they
# keep GPUs for interactive hours (lab_rules.py).
# One round trip per host per tick. stdin, one request a line, tab-separated ('-' = none):
#   A key session attempt_dir output_glob [offset]   a watched attempt; with an offset, the
#                                             log from there while it runs (up to 64 KiB, `F`)
#   O key glob                                an output check (already done?)
#   P key glob                                a precondition
# Output: sections that start with a `BOUNDARY name` line. Sessions are listed before any exit
# record is read, so a job that ends in between is seen as exited, never as lost. Log bytes are
# hex-encoded so nothing in a log can forge a section. Commands before the request loop read
# /dev/null: stdin holds the requests.
set -u
set -f
cwd=$1 prefix=$2 query_gpus=$3 b=$4 cores=${5:-0} claims_arg=${6:-} want=${7:--}
rules_arg=${8:-}
health=0
if [ "$query_gpus" = 2 ]; then query_gpus=1 health=1; fi
tab='	'  # a literal tab: no subshell for it on every probe

relative_ok=1
if [ -n "$cwd" ] && [ "$cwd" != "-" ]; then cd "$cwd" 2>/dev/null || relative_ok=0; fi

# eq-tui include: _matches.sh
# eq-tui include: _proc_groups.sh
hex() { od -An -v -tx1 | tr -d ' \n'; }
# first_line VAR FILE: the file's first line into VAR (empty when there is none), read by the
# shell itself: a process per small file per attempt per tick adds up over many hosts
first_line() {
    eval "$1="
    if [ -r "$2" ]; then IFS= read -r "$1" < "$2" || :; fi
}
# last_lines_hex: for each `BOUNDARY KEY` line of stdin, an `L<TAB>KEY<TAB>HEX` line: the last
# non-blank line (a carriage return also ends a line, as progress bars use it) of the text
# after it, its last 2 KiB hex-encoded with its newline (nothing if none); and, when an earlier
# line states an epoch counter (Keras's `Epoch 5/8` above the bar that redraws after it), an
# `E<TAB>KEY<TAB>HEX` line: the last such line, its first 1 KiB
last_lines_hex() {
    LC_ALL=C awk -v b="$b" '
        BEGIN { for (i = 1; i < 256; i++) code[sprintf("%c", i)] = i; mark = b " " }
        function hexed(text,    out, i) {
            out = ""
            for (i = 1; i <= length(text); i++) out = out sprintf("%02x", code[substr(text, i, 1)])
            return out
        }
        function flush() {
            if (key == "") return
            if (length(last) > 2048) last = substr(last, length(last) - 2047)
            print "L\t" key "\t" (last != "" ? hexed(last "\n") : "")
            if (epoch != "" && epoch != last) print "E\t" key "\t" hexed(substr(epoch, 1, 1024) "\n")
        }
        index($0, mark) == 1 { flush(); key = substr($0, length(mark) + 1); last = ""; epoch = ""; next }
        {
            n = split($0, parts, "\r")
            for (i = 1; i <= n; i++) {
                if (parts[i] ~ /^[ \t\v\f]*$/) continue
                last = parts[i]
                if (last ~ /[Ee][Pp][Oo][Cc][Hh][^A-Za-z0-9]*[0-9]/) epoch = last
            }
        }
        END { flush() }'
}

echo "$b sessions"
if command -v screen >/dev/null 2>&1; then
    screen -ls 2>/dev/null </dev/null |
        sed -n 's/^[[:space:]]*\([0-9][0-9]*\)\.\([^[:space:]]*\).*/screen \1.\2/p' |
        while IFS= read -r line; do
            name=${line#screen *.}
            case $name in "$prefix"*) echo "$line" ;; esac
        done
fi
# eq-tui include: _tmux.sh
if command -v tmux >/dev/null 2>&1; then
    eq_tmux list-sessions -F '#{session_name}' 2>/dev/null </dev/null | while IFS= read -r name; do
        case $name in "$prefix"*) echo "tmux $name" ;; esac
    done
fi

# the requests, read before anything else: the GPU section needs our attempts' process groups
requests=
while IFS= read -r line; do requests="$requests$line
"; done
# our attempts' process groups and sessions (each wrapper leads both): " 123 456 "
ours=" "
if [ "$query_gpus" = 1 ]; then
    while IFS="$tab" read -r kind key a dir c; do
        [ "$kind" = A ] || continue
        first_line g "$dir/pgid"
        case $g in ''|*[!0-9]*) ;; *) ours="$ours$g " ;; esac
    done <<REQUESTS
$requests
REQUESTS
fi

if [ "$query_gpus" = 1 ]; then
    echo "$b gpus"
    # power.draw rides in this one query (what each run cost: engine/tick/cost.py)
    nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,power.draw \
        --format=csv,noheader,nounits 2>&1 </dev/null
    echo "$b gpus_rc $?"
    echo "$b apps"
    apps=$(nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory \
        --format=csv,noheader,nounits 2>&1 </dev/null)
    apps_rc=$?
    [ -z "$apps" ] || printf '%s\n' "$apps"
    echo "$b apps_rc $apps_rc"
    # who holds each GPU process: pid, process group, session (which attempt it belongs to),
    # user, command. A process of one of our attempts is known from /proc/PID/stat, read by the
    # shell itself; one ps (user and command) only for the others that are there: someone
    # else's, a leftover. A pid with no /proc entry is gone, or in another pid namespace (a
    # container's nvidia-smi lists the host's pids): ps could say nothing of it either, and a
    # ps per probe for the memory an ended job leaves while the driver frees it adds up
    # the pids (each line's first field), read by the shell itself: no sed and paste per probe
    pids=
    while IFS= read -r eq_line; do
        case $eq_line in *,*) ;; *) continue ;; esac
        eq_p=${eq_line%%,*}
        eq_p=${eq_p#"${eq_p%%[![:space:]]*}"}
        case $eq_p in ''|*[!0-9]*) continue ;; esac
        pids="$pids${pids:+,}$eq_p"
    done <<APPS
$apps
APPS
    if [ "$apps_rc" = 0 ] && [ -n "$pids" ]; then
        echo "$b owners"
        others=
        if [ -d /proc/self ]; then
            IFS=,
            for p in $pids; do
                IFS=' '
                if proc_groups "$p"; then
                    case $ours in
                        *" $eq_pgid "*|*" $eq_sid "*) echo "$p $eq_pgid $eq_sid" ;;
                        *) others="$others${others:+,}$p" ;;
                    esac
                fi
                IFS=,
            done
            IFS=' '
        else
            others=$pids
        fi
        if [ -n "$others" ]; then
            ps -ww -o pid=,pgid=,sid=,user=,args= -p "$others" 2>/dev/null </dev/null | cut -c1-300
        fi
    fi
    # a GPU that several processes share: its utilisation says nothing of any one of them, so
    # each process's own (one sample, ~55 ms on an H100; only then, never on a card alone)
    shared=
    eq_seen=$tab
    while IFS=, read -r eq_p eq_uuid eq_rest; do
        [ -n "$eq_uuid" ] || continue
        case $eq_seen in *"$tab$eq_uuid$tab"*) shared=1 ;; esac
        eq_seen="$eq_seen$eq_uuid$tab"
    done <<APPS
$apps
APPS
    if [ "$apps_rc" = 0 ] && [ -n "$shared" ]; then
        echo "$b pmon"
        nvidia-smi pmon -c 1 -s u 2>&1 </dev/null
        echo "$b pmon_rc $?"
    fi
    if [ "$health" = 1 ]; then
        # uncorrected ECC errors and retired pages pending: queries that need no root
        echo "$b health"
        nvidia-smi --query-gpu=index,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending \
            --format=csv,noheader,nounits 2>&1 </dev/null
        echo "$b health_rc $?"
    fi
fi

# eq-tui include: _claims.sh
if [ -n "$claims_arg" ]; then
    claims_at "$claims_arg"
    echo "$b claims"
    void=
    set +f
    set -- "$claims"/c.*
    set -f
    for f; do
        [ -f "$f" ] && claim_read "$f" || continue
        if claim_live; then
            echo "${f##*/} $c_gpu $c_user $c_project $c_token $c_job $c_attempt $c_pid $c_mib $c_session"
        elif [ "$c_user" = "$eq_user" ]; then
            void="$void $f"
        fi
    done
    # shellcheck disable=SC2086 # claim paths have no blanks
    [ -z "$void" ] || rm -f $void 2>/dev/null </dev/null
    [ "$want" = - ] || claims_want "$want"
    echo "$b user"
    echo "$eq_user"
    # other users' engines that wait here (their want files, rewritten by each of their
    # probes): only when there are some does a `find` tell the fresh ones
    others=
    set +f
    for f in "$claims"/w.*; do
        case ${f##*/} in "w.$eq_user."*|'w.*') ;; *) others=1 ;; esac
    done
    set -f
    if [ -n "$others" ]; then
        echo "$b wants"
        find "$claims" -maxdepth 1 -name 'w.*' -mmin -2 2>/dev/null </dev/null |
            while IFS= read -r f; do
                w_tag=
                read -r w_tag w_user w_project w_token w_rest < "$f" 2>/dev/null
                [ "$w_tag" = eqwant1 ] && echo "$w_user $w_project $w_token"
            done
    fi
fi
if [ -n "$rules_arg" ]; then
    case $rules_arg in -) rules=${EQ_TUI_RULES:-/etc/eq-tui/rules.yaml} ;; *) rules=$rules_arg ;; esac
    if [ -f "$rules" ] && [ -r "$rules" ]; then
        echo "$b rules_path"
        echo "$rules"
        # what a launch rechecks under the lock: the file it placed by (_rules_launch.sh)
        echo "$b rules_sum"
        cksum < "$rules" 2>/dev/null
        echo "$b rules"
        clock=
        while IFS= read -r line || [ -n "$line" ]; do
            printf '%s\n' "$line"
            case $line in *interactive*) clock=1 ;; esac
        done < "$rules"
        if [ -n "$clock" ]; then
            echo "$b clock"
            date '+%H:%M %u' 2>/dev/null </dev/null
        fi
    fi
fi

if [ "$cores" = 1 ]; then
    echo "$b cores $(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null || echo 0)"
fi

echo "$b requests"
# kill -0 succeeds on a zombie (an orphan that init has not reaped yet): not alive for us.
# /proc/PID/stat is read with the shell's own `read` (no process; `ps -e` costs tens of ms on
# a busy box); without /proc, ps is asked about that one pid.
is_zombie() {
    if [ -d /proc/self ]; then
        read -r st < "/proc/$1/stat" 2>/dev/null || return 1
        case ${st##*) } in Z*) return 0 ;; esac
        return 1
    fi
    case $(ps -o stat= -p "$1" 2>/dev/null </dev/null) in *Z*) return 0 ;; esac
    return 1
}
# every attempt's log size from one wc, and the running ones' last lines from one awk (below):
# a process or three per attempt per tick add up over many hosts
nl='
'
set --
while IFS="$tab" read -r kind key a b2 c follow; do
    [ "$kind" = A ] && set -- "$@" "$b2/log"
done <<REQUESTS
$requests
REQUESTS
sizes=$nl
if [ "$#" -gt 0 ]; then
    counted=$(wc -c -- "$@" 2>/dev/null </dev/null)
    while read -r eq_n eq_name; do
        sizes="$sizes$eq_name$tab$eq_n$nl"
    done <<COUNTED
$counted
COUNTED
fi
running=
while IFS="$tab" read -r kind key a b2 c follow; do
    case $kind in
        A)
            dir=$b2 glob=$c
            first_line pid "$dir/pid"
            first_line pgid "$dir/pgid"
            case $pgid in ''|*[!0-9]*) pgid=- ;; esac
            alive=0
            case $pid in ''|*[!0-9]*) pid=- ;; *) kill -0 "$pid" 2>/dev/null && alive=1
                   if [ "$alive" = 1 ] && is_zombie "$pid"; then alive=0; fi ;;
            esac
            first_line start "$dir/start"
            first_line code "$dir/exit"
            size=
            case $sizes in
                *"$nl$dir/log$tab"*)
                    size=${sizes#*"$nl$dir/log$tab"}
                    size=${size%%"$nl"*} ;;
            esac
            exited_at=-
            out=-
            if [ -n "$code" ]; then
                first_line exited_at "$dir/end"
                case $exited_at in
                    ''|*[!0-9.]*) exited_at=$(stat -c %Y "$dir/exit" 2>/dev/null ||
                                              stat -f %m "$dir/exit" 2>/dev/null) ;;
                esac
                if [ "$glob" != "-" ]; then
                    if matches "$glob"; then out=1; else out=0; fi
                fi
            fi
            echo "A${tab}${key}${tab}${pid:--}${tab}${alive}${tab}${start:--}${tab}${code:--}${tab}${exited_at:--}${tab}${size:-0}${tab}${out}${tab}${pgid}"
            if [ -n "$code" ]; then
                echo "T${tab}${key}${tab}$(tail -c 4096 "$dir/log" 2>/dev/null | hex)"
            else
                running="$running$key$tab$dir/log$nl"
            fi
            # an attempt that ended since the last look is followed to its end too: its
            # last reports count
            case $follow in
                ''|*[!0-9]*) ;;
                *) if [ "${size:-0}" -gt "$follow" ] 2>/dev/null; then
                       echo "F${tab}${key}${tab}${follow}${tab}$(tail -c +"$((follow + 1))" "$dir/log" 2>/dev/null | head -c 65536 | hex)"
                   fi ;;
            esac
            ;;
        O|P)
            if matches "$a"; then found=1; else found=0; fi
            echo "${kind}${tab}${key}${tab}${found}"
            ;;
    esac
done <<REQUESTS
$requests
REQUESTS
# each running attempt's last line (`L`) and epoch line (`E`): its log's last 32 KiB after a
# line naming it, which starts with this probe's boundary (no log can have written that before
# the probe began); 32 KiB, not the 2 the last line needs: Keras redraws its bar 20 times a
# second, each time with as many backspaces, and pushes its epoch's line out of a short tail
# within a second (one awk reads 64 attempts' 32 KiB in some 20 ms)
if [ -n "$running" ]; then
    while IFS="$tab" read -r key log; do
        [ -n "$key" ] || continue
        printf '%s %s\n' "$b" "$key"
        tail -c 32768 "$log" 2>/dev/null </dev/null
        echo
    done <<RUNNING | last_lines_hex
$running
RUNNING
fi
echo "$b end"
