# read_metrics.sh MAX BOUNDARY CWD PATH...: each readable file as a section `BOUNDARY file I
# SIZE` (I: its position among the paths), bounded (_read_file.sh). A finished attempt's metric
# files, when the probe that saw its exit did not bring them (results/collect.py).
set -u
max=$1 b=$2 cwd=$3
shift 3
if [ -n "$cwd" ] && [ "$cwd" != "-" ]; then cd "$cwd" 2>/dev/null || :; fi
# eq-tui include: _read_file.sh
i=0
for f in "$@"; do
    read_file "$b file $i" "$f" "$max"
    i=$((i + 1))
done
echo "$b end"
