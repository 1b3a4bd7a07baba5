# Prepended to probe.sh, with two arguments of its own after probe.sh's four: $5 the partition
# ('' for all nodes), $6 1 to list the nodes this tick ($2 is the job name prefix, $4 the
# boundary; stdin holds the requests, so Slurm's commands read /dev/null). Slurm is asked first,
# so a job that ends in between has its exit record read after: seen as exited, never as lost.
echo "$4 slurm"
squeue -h -t all -u "$(id -un)" -o '%i|%j|%T|%r|%N' 2>&1 </dev/null
echo "$4 slurm_rc $?"
if [ "${6:-0}" = 1 ]; then
    nodes=$(scontrol show node -o -d 2>&1 </dev/null)
    rc=$?
    echo "$4 nodes"
    if [ "$rc" = 0 ]; then
        # only the partition's nodes cross the wire (a big cluster lists thousands)
        printf '%s\n' "$nodes" | awk -v p="${5:-}" 'p == "" { print; next } {
            for (i = 1; i <= NF; i++) if (substr($i, 1, 11) == "Partitions=") {
                if (index("," substr($i, 12) ",", "," p ",")) print
                next
            } }'
    else
        printf '%s\n' "$nodes"
    fi
    echo "$4 nodes_rc $rc"
fi
