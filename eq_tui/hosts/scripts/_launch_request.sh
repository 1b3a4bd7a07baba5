# _launch_request.sh: included (shell_host.script) by launch.sh and slurm_submit.sh once they
# have created the attempt dir $dir and set $not_starting ("not launching", "not submitting").
# read_launch_request reads stdin as shell_host.launch_stdin writes it: a line with the number N
# of env lines, N `export NAME='value'` lines, the command text, EQ_LAUNCH_END; it sets $envtext
# and $cmd. A first line `D GPUS BELOW_MIB ROUNDS EVERY_S` asks launch.sh to wait for GPUs still
# draining (_drain_wait.sh): it sets $drain_gpus ('-': none), $drain_below, $drain_rounds and
# $drain_every. A request cut off on the way (the engine died mid-send) must never start anything:
# it is complete only with every announced env line and the end marker as its last line.
cut_off() {
    rmdir "$dir" 2>/dev/null
    echo "eq-tui: the launch request was cut off; $not_starting" >&2
    exit 9
}
fail_write() {
    echo "eq-tui: cannot write $1 in $dir (disk full?); $not_starting" >&2
    exit 8
}
read_launch_request() {
    IFS= read -r count || cut_off
    drain_gpus=-
    case $count in
        "D "*)
            IFS=' ' read -r drain_gpus drain_below drain_rounds drain_every <<DRAIN
${count#D }
DRAIN
            case $drain_gpus,$drain_below,$drain_rounds in
                *[!0-9,]*|,*) cut_off ;;
            esac
            case $drain_every in ''|*[!0-9.]*) cut_off ;; esac
            IFS= read -r count || cut_off
            ;;
    esac
    case $count in ''|*[!0-9]*) cut_off ;; esac
    envtext=
    i=0
    while [ "$i" -lt "$count" ]; do
        IFS= read -r line || cut_off
        envtext="$envtext$line
"
        i=$((i + 1))
    done
    cmd=
    last=
    while IFS= read -r line; do
        [ -n "$last" ] && cmd="$cmd$pending
"
        pending=$line
        last=1
    done
    [ -n "$last" ] && [ "$pending" = "EQ_LAUNCH_END" ] || cut_off
}
