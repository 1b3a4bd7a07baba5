# slurm_cancel.sh JOB_NAME ATTEMPT_DIR
# scancel by the job id recorded at submit; by the exact job name when that record is missing.
set -u
name=$1 dir=$2
id=$(cat "$dir/slurm_job_id" 2>/dev/null)
case $id in
    ''|*[!0-9_]*) exec scancel -u "$(id -un)" --name="$name" ;;
    *) exec scancel "$id" ;;
esac
