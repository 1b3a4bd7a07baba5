# _attempt_records.sh: included (shell_host.script) in the attempt wrapper (_job_wrapper.sh,
# which launch.sh and slurm_submit.sh write as run.sh), with $dir the attempt dir. The host's
# clock times both ends of an attempt: `start` as the command's process is forked, `end` and
# then `exit` (atomically) once it is over. A stop (kill.sh, slurm_cancel.sh) leaves its fields
# in `stop`: they follow the exit code in `exit`, whose first line stays the code alone.
# stamp NAME: the host's time, to the sub-second where `date` has it, into $dir/NAME
stamp() {
    eq_now=$(date +%s.%N 2>/dev/null)
    case $eq_now in *N*|"") eq_now=$(date +%s) ;; esac
    echo "$eq_now" > "$dir/$1"
}
# finish CODE: an attempt that never ran its command (set-up failed) starts as it ends
finish() {
    [ -s "$dir/start" ] || stamp start
    stamp end
    { echo "$1"; [ ! -s "$dir/stop" ] || cat "$dir/stop"; } > "$dir/exit.tmp" &&
        mv "$dir/exit.tmp" "$dir/exit"
}
fail() {
    echo "eq-tui: $1"
    finish 2
    exit 2
}
