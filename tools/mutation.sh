#!/usr/bin/env bash
# Mutation testing of the privacy-critical modules with mutmut; prints each module's score
# and its surviving mutants (docs/mutation-testing.md).
#
#   tools/mutation.sh [-j JOBS] [MODULE ...]      modules: tools/mutation.toml (default all)
#
# Needs the `mutation` extra (pip install -e '.[mutation,test]'). CPU-heavy: one module at
# a time, JOBS (default 1) test processes. Every run starts from a fresh mutants/ (mutmut's
# working copy, removed first; mutmut does not notice changes of [tool.mutmut] in an old
# one); the report is also written to mutants/report.json. Exit status 1 when a module is
# below its target score.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
JOBS=1
if [[ "${1:-}" == "-j" ]]; then
    JOBS=$2
    shift 2
fi
mapfile -t MODULES < <(
    if [[ $# -gt 0 ]]; then printf '%s\n' "$@"; else
        "$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("tools/mutation.toml", "rb"))["modules"]))'
    fi
)
if [[ -d mutants ]]; then
    if [[ -e mutants/mutmut-stats.json || -z "$(ls -A mutants)" ]]; then
        rm -rf mutants
    else
        echo "mutants/ exists but is not mutmut's working copy; move it away first" >&2
        exit 2
    fi
fi
for mod in "${MODULES[@]}"; do
    mapfile -t GLOBS < <("$PY" tools/mutation_report.py --globs "$mod")
    echo "== mutmut: $mod (${#GLOBS[@]} pattern(s), $JOBS job(s))" >&2
    # the mutated copy in mutants/src must be imported, not the working tree
    env -u PYTHONPATH "$PY" -m mutmut run --max-children "$JOBS" "${GLOBS[@]}" >&2
done
"$PY" tools/mutation_report.py --json mutants/report.json "${MODULES[@]}"
