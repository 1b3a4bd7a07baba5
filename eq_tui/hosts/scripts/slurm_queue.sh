# Prepended to probe.sh (same arguments: $2 is the job name prefix, $4 the boundary; stdin
# holds the requests, so squeue reads /dev/null). Slurm is asked first, so a job that ends in
# between has its exit record read after: seen as exited, never as lost.
echo "$4 slurm"
squeue -h -t all -u "$(id -un)" -o '%i|%j|%T|%r' 2>&1 </dev/null
echo "$4 slurm_rc $?"
