# _matches.sh: included (shell_host.script) by probe.sh and preflight.sh, which run under
# `set -f` and set $relative_ok to 1 once they are in the job's working directory.
# matches GLOB: does anything match it?
matches() {
    # a relative glob must not be matched against wherever we happen to be
    case $1 in /*) ;; *) [ "$relative_ok" = 1 ] || return 1 ;; esac
    set +f
    old_ifs=$IFS
    IFS=
    for candidate in $1; do
        if [ -e "$candidate" ]; then IFS=$old_ifs; set -f; return 0; fi
    done
    IFS=$old_ifs
    set -f
    return 1
}
