# tail.sh ATTEMPT_DIR LINES: the last LINES lines of the attempt's log, from its last 128 KiB: a
# progress bar redrawn with \r for hours is one line of megabytes, read every second by the UI
set -u
dir=$1 lines=$2
log="$dir/log"
[ -f "$log" ] || exit 0
tail -c 131072 "$log" | tail -n "$lines"
