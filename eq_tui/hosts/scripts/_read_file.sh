# _read_file.sh: included by read_metrics.sh and probe.sh (a finished attempt's metric files,
# read by the probe that sees its exit; results/collect.py parses both the same way).
# read_file HEADER FILE MAX: when FILE is a readable file, a line `HEADER SIZE` and its text;
# a file over MAX bytes sends its first line (a CSV header) and its last MAX bytes.
read_file() {
    case $2 in "~/"*) set -- "$1" "$HOME/${2#\~/}" "$3" ;; esac
    [ -f "$2" ] && [ -r "$2" ] || return 0
    eq_size=$(wc -c < "$2" 2>/dev/null)
    eq_size=${eq_size##* }
    echo "$1 ${eq_size:-0}"
    if [ "${eq_size:-0}" -gt "$3" ]; then
        head -n 1 "$2" | head -c 65536
        echo
        tail -c "$3" "$2"
    else
        cat "$2"
    fi
    echo
}
