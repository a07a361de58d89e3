#!/usr/bin/env bash
# The whole test suite: build, then every vitest project (unit, envd, network, runtime, ...).
# Needs root and the packages from scripts/setup.sh. Prints a final "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."
npm run build --silent || exit 1
report=$(mktemp)
trap 'rm -f "$report"' EXIT
# One file at a time across all projects: end-to-end groups share fixed ports (49983 for envd's
# debug mode, 18000 for the test node) and the machine has two cores.
# The deployment tests (Docker, systemd-nspawn, a release) run on their own: npm run test:deploy.
args=("$@")
[[ " $* " == *" --project"* ]] || args+=(--project '!deploy')
npx vitest run --no-file-parallelism --maxWorkers=1 --reporter=default --reporter=json --outputFile.json="$report" "${args[@]}"
status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' "$report" 2>/dev/null || true
exit $status
