# _proc_groups.sh: included (shell_host.script) by the attempt wrappers (their own group),
# probe.sh (which attempt a GPU process belongs to) and kill.sh (never its own group).
# proc_groups PID: sets eq_pgid and eq_sid to the process's group and session, read by the
# shell itself from /proc (a ps per call adds up on a busy host); ps where there is no /proc.
# Returns 1, both empty, when the process is gone.
proc_groups() {
    eq_pgid= eq_sid=
    if [ -d /proc/self ]; then
        eq_stat=
        read -r eq_stat < "/proc/$1/stat" 2>/dev/null || return 1
        # after the command's closing paren: state ppid pgrp session ...
        set -- ${eq_stat##*) }
    else
        set -- x x $(ps -o pgid=,sid= -p "$1" 2>/dev/null </dev/null)
    fi
    [ "$#" -ge 4 ] || return 1
    eq_pgid=$3 eq_sid=$4
}
