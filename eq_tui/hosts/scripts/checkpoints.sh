# checkpoints.sh CWD PATTERN: a job's checkpoint files (hosts/checkpoints.py), each line
# `MTIME<TAB>SIZE<TAB>PATH`, for the plain files PATTERN (a glob relative to CWD; the manifest
# allows no blank or shell syntax in it) matches. A file written to in the last two seconds is
# looked at again a second later and left out if its size or time changed: it is still growing.
# Exit 3: CWD is not a directory.
set -u
cwd=$1 pattern=$2
if [ "$cwd" != "-" ]; then
    cd "$cwd" 2>/dev/null || { echo "no such directory: $cwd" >&2; exit 3; }
fi
tab=$(printf '\t')
nl='
'

mtime() {
    stat -c %.9Y "$1" 2>/dev/null || stat -c %Y "$1" 2>/dev/null || stat -f %m "$1" 2>/dev/null
}

look() {
    # $pattern unquoted: the one place it is expanded, as a glob
    for f in $pattern; do
        [ -f "$f" ] || continue
        case $f in *"$tab"*) continue ;; esac
        size=$(wc -c < "$f" 2>/dev/null | tr -d ' ')
        printf '%s\t%s\t%s\n' "$(mtime "$f")" "${size:-0}" "$f"
    done
}

first=$(look)
[ -n "$first" ] || exit 0
now=$(date +%s)
fresh=0
while IFS="$tab" read -r when _size _path; do
    if [ $((now - ${when%%.*})) -lt 2 ] 2>/dev/null; then fresh=1; fi
done <<EOF
$first
EOF
if [ "$fresh" = 0 ]; then
    printf '%s\n' "$first"
    exit 0
fi
sleep 1
second=$(look)
# only the lines the two looks agree on: the files neither grew nor were rewritten
printf '%s\n' "$first" | while IFS= read -r line; do
    case "$nl$second$nl" in
        *"$nl$line$nl"*) printf '%s\n' "$line" ;;
    esac
done
