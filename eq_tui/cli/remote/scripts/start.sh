# start.sh EQ_TUI DIR RUN_DIR ARGS...: runs EQ_TUI ARGS... --detach in DIR with RUN_DIR
# resolved like the remote commands do (~, or relative to the login directory).
eq=$1; dir=$2; run=$3; shift 3
case $run in /*) ;; "~") run=$HOME ;; "~/"*) run=$HOME/${run#"~/"} ;; *) run=$HOME/$run ;; esac
cd -- "$dir" || exit 3
exec "$eq" "$@" --detach --run-dir "$run"
