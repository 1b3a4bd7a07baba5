# _rules_launch.sh: included by launch.sh after _claims.sh and _claim_launch.sh (mtime_of). The
# lab's rules (lab_rules.py) rechecked under the host's lock, where a launch could break them
# since the engine's probe read them:
#   - the rules file is still the one the engine placed the job by (its cksum, which the probe
#     reported): a file changed since (a GPU newly kept free or reserved for someone, a new
#     max_gpus_per_user or interactive window) refuses the launch, and the engine places the
#     job again by the new rules. So every rule of the file is rechecked, with no second YAML
#     reader in sh to disagree with the engine's.
#   - max_gpus_per_user: the GPUs the user holds here (the live claims of all their engines)
#     with this launch's are no more than MAX while another user's engine waits here (a fresh
#     want file): since the probe, the user's other launches (other engines, or this engine's
#     own in the same tick) may have taken GPUs.
# Not rechecked: an interactive window that opens between the probe and the launch (the
# probe's clock decides; they are a second or so apart), and `prefer` (an order, not a limit).
# Refused: $refused says why, like a claim refusal (nothing is taken, no attempt is spent).

# rules_check RULES SUM MAX GPUS: RULES the file ('-': $EQ_TUI_RULES, else the default), SUM
# its cksum as the engine's probe read it ("CRC.SIZE"; '-': there was none; '?': not known,
# not rechecked), MAX the engine's max_gpus_per_user ('-': none), GPUS this launch's
rules_check() {
    refused=
    case $1 in ''|-) eq_rules=${EQ_TUI_RULES:-/etc/eq-tui/rules.yaml} ;; *) eq_rules=$1 ;; esac
    eq_looked=$2 eq_max=$3 eq_gpus=$4
    if [ "$eq_looked" != '?' ]; then
        eq_seen=-
        if [ -f "$eq_rules" ] && [ -r "$eq_rules" ]; then
            # shellcheck disable=SC2046 # cksum's two words: CRC and size
            set -- $(cksum < "$eq_rules" 2>/dev/null)
            eq_seen="${1:-}.${2:-}"
        fi
        if [ "$eq_seen" != "$eq_looked" ]; then
            refused="the lab's rules ($eq_rules) changed since the engine looked"
            return 0
        fi
    fi
    case $eq_max in ''|*[!0-9]*) return 0 ;; esac
    eq_waiter=
    eq_now=$(date +%s)
    for eq_w in "$claims"/w.*; do
        [ -f "$eq_w" ] || continue
        w_tag= w_user= w_poll=
        read -r w_tag w_user w_project w_token w_poll w_rest < "$eq_w" 2>/dev/null
        [ "$w_tag" = eqwant1 ] && [ -n "$w_user" ] && [ "$w_user" != "$eq_user" ] || continue
        case $w_poll in ''|*[!0-9]*) w_poll=2 ;; esac
        mtime_of "$eq_w" && [ $((eq_now - eq_mtime)) -le $((3 * w_poll + 10)) ] || continue
        eq_waiter=$w_user
        break
    done
    [ -n "$eq_waiter" ] || return 0
    eq_held=" "
    for eq_file in "$claims"/c.*; do
        [ -f "$eq_file" ] && claim_read "$eq_file" && [ "$c_user" = "$eq_user" ] || continue
        case $eq_held in *" $c_gpu "*) continue ;; esac
        claim_live && eq_held="$eq_held$c_gpu "
    done
    eq_new=
    eq_old_ifs=$IFS
    IFS=,
    for eq_g in $eq_gpus; do
        case $eq_held in *" $eq_g "*) ;; *) eq_held="$eq_held$eq_g " eq_new=1 ;; esac
    done
    IFS=$eq_old_ifs
    [ -n "$eq_new" ] || return 0
    # shellcheck disable=SC2086 # GPU indices
    set -- $eq_held
    if [ "$#" -gt "$eq_max" ]; then
        refused="the lab's rules allow $eq_max GPU(s) per user while others wait ($eq_waiter);"
        refused="$refused $eq_user would hold $#"
    fi
}
