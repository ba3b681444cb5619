#!/usr/bin/env sh
# Runs every scenario in scenarios/ into DIR (one folder per scenario) with the CSV tables only,
# so that two trees' results can be compared byte for byte:
#
#   sh bench/scenario_outputs.sh /tmp/before          # on the old tree
#   sh bench/scenario_outputs.sh /tmp/after           # on the new tree
#   diff -r /tmp/before /tmp/after && echo identical
#
# A refactoring that changes no behaviour leaves that diff empty. The JSON settings file (it
# names the version) and the figures are not written; each run's table goes to DIR/NAME.txt.
# PYTHON defaults to the project's venv.
set -eu
out=${1:?usage: bench/scenario_outputs.sh DIR}
python=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
for file in scenarios/*.yaml; do
    name=$(basename "$file" .yaml)
    "$python" -m simulator run "$file" --output "$out/$name" --format csv --no-plot --quiet \
        > "$out/$name.txt"
    echo "$name: done"
done
