# locate.sh RUN_DIR: resolves RUN_DIR on the host (~ and relative paths from the login
# directory) and reports, NUL separated: the absolute path, whether a state file is there,
# and the control pointer (or ""). Exit 3: no such directory.
dir=$1
case $dir in "~") dir=$HOME ;; "~/"*) dir=$HOME/${dir#"~/"} ;; esac
cd "$dir" 2>/dev/null || exit 3
printf '%s\0' "$(pwd -P)"
if [ -f queue_state.json ] || [ -f queue_state.prev.json ]; then printf 'state\0'
else printf 'none\0'; fi
cat control.json 2>/dev/null
exit 0
