# read_file.sh PATH: the file's bytes.
cat -- "$1"
