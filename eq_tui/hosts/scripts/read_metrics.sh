# read_metrics.sh MAX BINMAX BOUNDARY CWD [HOW ADIR PATH]...: a finished attempt's metrics files
# (results/collect.py), each in a section `BOUNDARY ENC I SIZE PATH` (I: the request's position,
# PATH: the file read) followed by its bytes: ENC `file` as text (a file over MAX bytes: its first
# line, a CSV header, and its last MAX bytes), `b64` or `hex` (no base64 here: od) for a binary
# file's last BINMAX bytes, `none` for a file found but not sent. `BOUNDARY several I KEY...`: files
# of several runs were written while the attempt ran, and which is its own cannot be told.
# Requests, three arguments each (ADIR: the attempt dir, whose `cmd` and `exit` date the attempt):
#   text - PATH        the file PATH
#   glob ADIR PATTERN  the newest file PATTERN matches that was written while the attempt ran
#   tb ADIR PATH       an event file, or the newest one written while the attempt ran in the
#                      directory PATH or two levels below; tbnote: the same, found only
#   find-hf ADIR -     discovery in the cwd: HF Trainer's trainer_state.json in an output dir
#   find-pl ADIR -     Lightning's lightning_logs/version_N/metrics.csv
#   find-tb ADIR -     TensorBoard event files (Lightning's, HF's runs/), when neither of the
#                      above was found (they say the same under other names); find-tbnote: found
#                      only
# Discovery reads only files written while the attempt ran. Where they belong to several runs, the
# one whose directory the job's command names is its own; none named, the newest is read only when
# no other attempt of the run was running at the same time (a shared cwd holds other jobs' files).
set -u
max=$1 binmax=$2 b=$3 cwd=$4
shift 4
incwd=1
if [ -n "$cwd" ] && [ "$cwd" != "-" ]; then cd "$cwd" 2>/dev/null || incwd=0; fi
IFS=  # a pattern is expanded, never split: a path may hold spaces
nl='
'

home() {
    case $1 in "~/"*) printf '%s' "$HOME/${1#\~/}" ;; *) printf '%s' "$1" ;; esac
}
size_of() {
    s=$(wc -c < "$1" 2>/dev/null | tr -d ' ')
    printf '%s' "${s:-0}"
}
send_text() {  # I PATH
    size=$(size_of "$2")
    echo "$b file $1 $size $2"
    if [ "$size" -gt "$max" ]; then
        head -n 1 "$2" | head -c 65536; echo; tail -c "$max" "$2"
    else
        cat "$2"
    fi
    echo
}
send_bin() {  # I PATH
    size=$(size_of "$2")
    if command -v base64 >/dev/null 2>&1; then
        echo "$b b64 $1 $size $2"
        tail -c "$binmax" "$2" | base64
    else
        echo "$b hex $1 $size $2"
        tail -c "$binmax" "$2" | od -An -v -tx1
    fi
}
send() {  # HOW I PATH
    case $1 in
        text|glob|find-hf|find-pl) send_text "$2" "$3" ;;
        tb|find-tb) send_bin "$2" "$3" ;;
        *) echo "$b none $2 $(size_of "$3") $3" ;;
    esac
}
# fresh FILE ADIR: a plain file written while the attempt in ADIR ran (after its command was
# written, not after it ended); never a name with a newline (sections are lines)
fresh() {
    case $1 in *"$nl"*) return 1 ;; esac
    [ -f "$1" ] && [ -r "$1" ] && [ -f "$2/cmd" ] && [ "$1" -nt "$2/cmd" ] &&
        { [ ! -e "$2/exit" ] || [ ! "$1" -nt "$2/exit" ]; }
}
# newest ADIR PATTERN...: the newest fresh file the patterns match, in $best ("" when none)
newest() {
    adir=$1
    shift
    best=
    for pat in "$@"; do
        for f in $(home "$pat"); do
            fresh "$f" "$adir" || continue
            if [ -z "$best" ] || [ ! "$best" -nt "$f" ]; then best=$f; fi
        done
    done
}
# the part of a discovered path that tells runs apart: its first directory (two under the
# stacks' shared roots); a checkpoint or a file of the cwd itself is the cwd's run
key_of() {
    case $1 in
        */*) first=${1%%/*} ;;
        *) printf '.'; return ;;
    esac
    case $first in
        checkpoint-*) printf '.' ;;
        lightning_logs|runs) rest=${1#*/}; printf '%s/%s' "$first" "${rest%%/*}" ;;
        *) printf '%s' "$first" ;;
    esac
}
# overlapped ADIR: another attempt of the run (a sibling under the run's log root) ran while
# this one did
overlapped() {
    root=${1%/*}
    root=${root%/*}
    for other in "$root"/*/a*; do
        [ "$other" != "$1" ] && [ -f "$other/cmd" ] || continue
        if [ -e "$1/exit" ] && [ "$other/cmd" -nt "$1/exit" ]; then continue; fi
        if [ -e "$other/exit" ] && [ ! "$other/exit" -nt "$1/cmd" ]; then continue; fi
        return 0
    done
    return 1
}
# discover I HOW ADIR PATTERN...: the attempt's own newest file among those the patterns match
discover() {
    i=$1 how=$2 adir=$3
    shift 3
    [ "$incwd" = 1 ] || return 0
    words=" $(tr -c 'A-Za-z0-9_.+@%-' ' ' < "$adir/cmd" 2>/dev/null) "
    best= keys= named= named_keys=
    for pat in "$@"; do
        for f in $pat; do
            fresh "$f" "$adir" || continue
            k=$(key_of "$f")
            case "$nl$keys$nl" in *"$nl$k$nl"*) ;; *) keys="$keys$k$nl" ;; esac
            if [ -z "$best" ] || [ ! "$best" -nt "$f" ]; then best=$f; fi
            case $words in
                *" $k "*)
                    case "$nl$named_keys$nl" in
                        *"$nl$k$nl"*) ;;
                        *) named_keys="$named_keys$k$nl" ;;
                    esac
                    if [ -z "$named" ] || [ ! "$named" -nt "$f" ]; then named=$f; fi ;;
            esac
        done
    done
    [ -n "$best" ] || return 0
    stack=1
    if [ -n "$named" ]; then
        if [ "$(printf '%s' "$named_keys" | wc -l)" -eq 1 ]; then
            send "$how" "$i" "$named"
        else
            echo "$b several $i $(printf '%s' "$named_keys" | tr '\n' ' ')"
        fi
    elif overlapped "$adir"; then
        echo "$b several $i $(printf '%s' "$keys" | tr '\n' ' ')"
    else
        send "$how" "$i" "$best"
    fi
}

stack=0
i=0
while [ "$#" -ge 3 ]; do
    how=$1 adir=$2 path=$3
    shift 3
    case $how in
        text)
            f=$(home "$path")
            if [ -f "$f" ] && [ -r "$f" ]; then send_text "$i" "$f"; fi ;;
        glob)
            newest "$adir" "$path"
            [ -z "$best" ] || send_text "$i" "$best" ;;
        tb|tbnote)
            f=$(home "$path")
            if [ -f "$f" ] && [ -r "$f" ]; then
                send "$how" "$i" "$f"
            else
                newest "$adir" "$f/events.out.tfevents.*" "$f/*/events.out.tfevents.*" \
                    "$f/*/*/events.out.tfevents.*"
                [ -z "$best" ] || send "$how" "$i" "$best"
            fi ;;
        find-hf)
            discover "$i" "$how" "$adir" trainer_state.json 'checkpoint-*/trainer_state.json' \
                '*/checkpoint-*/trainer_state.json' '*/trainer_state.json' ;;
        find-pl)
            discover "$i" "$how" "$adir" 'lightning_logs/version_*/metrics.csv' \
                '*/lightning_logs/version_*/metrics.csv' ;;
        find-tb|find-tbnote)
            [ "$stack" = 1 ] ||
                discover "$i" "$how" "$adir" 'lightning_logs/version_*/events.out.tfevents.*' \
                    '*/lightning_logs/version_*/events.out.tfevents.*' \
                    'runs/*/events.out.tfevents.*' '*/runs/*/events.out.tfevents.*' ;;
    esac
    i=$((i + 1))
done
echo "$b end"
