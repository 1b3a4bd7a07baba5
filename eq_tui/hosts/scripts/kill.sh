# kill.sh LAUNCHER SESSION ATTEMPT_DIR [REASON]
# TERM the attempt's process group, KILL what is left after a grace period, then end the session
# addressed exactly (screen by PID.NAME, tmux by =NAME): a bare screen name matches by prefix.
# With REASON (a person's kill), an attempt with no exit record gets one (128 + the signal that
# ended it) and its log a line saying so: the wrapper died with its group and could not.
# Output: `exit CODE` when the attempt has an exit record by then.
set -u
launcher=$1 session=$2 dir=$3 reason=${4:-}
signal=

pgid=$(tr -d ' \n' < "$dir/pgid" 2>/dev/null)
# eq-tui include: _proc_groups.sh
# eq-tui include: _tmux.sh
proc_groups $$
mine=$eq_pgid
case $pgid in ''|*[!0-9]*) pgid= ;; esac
# Members of the group that are still running (zombies left for init to reap do not count).
running() {
    ps -eo pgid=,stat= 2>/dev/null | awk -v g="$pgid" '$1 == g && $2 !~ /^Z/ {n++} END {exit n == 0}'
}
if [ -n "$pgid" ] && [ "$pgid" -gt 1 ] && [ "$pgid" != "$mine" ]; then
    # `kill -TERM -- -PGID` is refused by dash ("Illegal number: --"): no `--`
    if kill -TERM "-$pgid" 2>/dev/null; then
        signal=TERM
        waited=0
        while running && [ "$waited" -lt 50 ]; do
            sleep 0.1 2>/dev/null || sleep 1
            waited=$((waited + 1))
        done
        running && signal=KILL
        kill -KILL "-$pgid" 2>/dev/null
    fi
fi
if [ -n "$reason" ] && [ -n "$signal" ] && [ -d "$dir" ] && [ ! -e "$dir/exit" ]; then
    case $signal in TERM) code=143 ;; *) code=137 ;; esac
    ended=$(date +%s.%N 2>/dev/null)
    case $ended in *N*|"") ;; *) echo "$ended" > "$dir/end" ;; esac
    printf '\neq-tui: %s (SIG%s to process group %s)\n' "$reason" "$signal" "$pgid" >> "$dir/log"
    echo "$code" > "$dir/exit.tmp" && mv "$dir/exit.tmp" "$dir/exit"
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
exit 0
