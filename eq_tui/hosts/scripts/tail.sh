# tail.sh ATTEMPT_DIR LINES [OFFSET]
# Without OFFSET: the last LINES lines of the attempt's log. With OFFSET: a first line with the
# log's current size, then the bytes after OFFSET (at most 1 MiB), for follow mode.
set -u
dir=$1 lines=$2 offset=${3:-}
log="$dir/log"
[ -f "$log" ] || exit 0
if [ -z "$offset" ]; then
    tail -n "$lines" "$log"
else
    size=$(wc -c < "$log" | tr -d ' ')
    echo "$size"
    if [ "$size" -gt "$offset" ]; then
        tail -c "+$((offset + 1))" "$log" | head -c 1048576
    fi
fi
