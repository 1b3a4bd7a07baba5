# find_eq_tui.sh: prints the eq-tui to use and its version; exit 127 when there is none.
if command -v eq-tui >/dev/null 2>&1; then eq=$(command -v eq-tui)
elif [ -x "$HOME/.local/bin/eq-tui" ]; then eq=$HOME/.local/bin/eq-tui
else exit 127; fi
printf '%s\n' "$eq"
"$eq" --version 2>&1 | head -n 1
