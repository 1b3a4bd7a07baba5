# slurm_finished.sh BOUNDARY JOB_NAME...
# stdin: `key<TAB>attempt_dir` lines for attempts that ended without their own exit record.
# Output: a `jobs` section (sacct with accounting storage, else `sacct -c` from the
# job-completion file, else `scontrol show job`), then hex log tails as `T key hex` lines.
set -u
b=$1
shift
tab=$(printf '\t')
hex() { od -An -v -tx1 | tr -d ' \n'; }
ids=
tails=
while IFS="$tab" read -r key dir; do
    id=$(cat "$dir/slurm_job_id" 2>/dev/null)
    case $id in ''|*[!0-9_]*) ;; *) ids="$ids${ids:+,}$id" ;; esac
    tails="$tails$key$tab$(tail -c 4096 "$dir/log" 2>/dev/null | hex)
"
done
names=$(printf '%s,' "$@")
names=${names%,}
fields=JobIDRaw,JobName,State,ExitCode
if [ -n "$ids" ]; then select="-j $ids"; else select="--name=$names"; fi
# $select is one or two words of digits, commas and job names: split on purpose
# shellcheck disable=SC2086
found=$(sacct -n -P -X -S 2000-01-01 -o "$fields" $select 2>/dev/null ||
        sacct -c -n -P -S 2000-01-01 -o "$fields" $select 2>/dev/null)
echo "$b sacct"
[ -n "$found" ] && printf '%s\n' "$found"
echo "$b scontrol"
if [ -z "$found" ] && [ -n "$ids" ]; then
    for id in $(printf '%s' "$ids" | tr ',' ' '); do
        scontrol show job -o "$id" 2>/dev/null
    done
fi
echo "$b tails"
printf '%s' "$tails" | while IFS="$tab" read -r key h; do
    [ -n "$key" ] && echo "T$tab$key$tab$h"
done
echo "$b end"
