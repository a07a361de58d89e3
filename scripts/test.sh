#!/usr/bin/env bash
# The whole test suite: build, then every vitest project (unit, envd, network, runtime, ...).
# Needs root and the packages from scripts/setup.sh. Prints a final "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
npm run build --silent || exit 1
report=$(mktemp)
trap 'rm -f "$report"' EXIT
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@"
status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' "$report" 2>/dev/null || true
exit $status
