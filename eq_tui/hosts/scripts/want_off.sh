# want_off.sh CLAIMS WANT: an engine that ends says so at once: its want file goes (WANT as
# probe.sh takes it, its flag 0), so no other engine here yields a freed GPU to it for the rest
# of the want's freshness (3 of its polls + 10 s).
set -u
claims_arg=$1 want=$2
# eq-tui include: _claims.sh
claims_at "$claims_arg"
claims_want "$want"
