# tail.sh ATTEMPT_DIR LINES
# The last LINES lines of the attempt's log.
set -u
dir=$1 lines=$2
log="$dir/log"
[ -f "$log" ] || exit 0
tail -n "$lines" "$log"
