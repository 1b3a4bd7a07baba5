# _tmux.sh: included (shell_host.script) by launch.sh, probe.sh and kill.sh. eq-tui's sessions
# live on a tmux server of its own (`tmux -L eq-tui`: one per user, under tmux's per-user
# socket dir), never in a person's default server: their `tmux ls` is not mixed with ours.
eq_tmux() { tmux -L eq-tui "$@"; }
