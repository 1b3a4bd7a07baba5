# upload.sh RUNS_DIR PROJECT NAME: writes stdin to $HOME/RUNS_DIR/PROJECT/NAME (atomically)
# and prints that directory. Exit 3: the directory cannot be made.
dir=$HOME/$1/$2
mkdir -p -- "$dir" && cd -- "$dir" || exit 3
cat > ".$3.part" && mv -f -- ".$3.part" "$3" && pwd -P
