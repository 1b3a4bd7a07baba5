# stop_args SCRIPT SIGNAL GRACE: a stop's signal name (SIG prefix dropped) into stop_signal and
# its grace in tenths of a second (the poll's step) into grace_tenths; a word that is neither a
# signal name nor seconds ends the script with exit 2, naming SCRIPT
stop_args() {
    stop_signal=${2#SIG}
    case $stop_signal in
        ''|*[!A-Z0-9]*) echo "eq-tui: $1: not a signal name: $stop_signal" >&2; exit 2 ;;
    esac
    case $3 in
        *.*) eq_whole=${3%%.*} eq_tenth=${3#*.} ;;
        *) eq_whole=$3 eq_tenth=0 ;;
    esac
    eq_tenth=$(printf '%.1s' "$eq_tenth")
    case $eq_whole$eq_tenth in
        *[!0-9]*) echo "eq-tui: $1: not a grace in seconds: $3" >&2; exit 2 ;;
    esac
    grace_tenths=$(( ${eq_whole:-0} * 10 + ${eq_tenth:-0} ))
}
