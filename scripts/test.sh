#!/usr/bin/env bash
# The whole test suite: build, then every vitest project (unit, envd, network, runtime, ...).
# Needs root and the packages from scripts/setup.sh. Arguments go to vitest (a --project, files).
# Ends with one line "N passed, N failed, N skipped", whatever happened before it.
set -uo pipefail
cd "$(dirname "$0")/.."
npm run build --silent || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every test file must belong to exactly one project of vitest.config.ts: a file no project
# includes would never run, and nothing would say so.
npx vitest list --filesOnly --json >"$work/listed.json" 2>"$work/list.err" || {
  cat "$work/list.err" >&2
  echo "0 passed, 1 failed, 0 skipped (vitest could not list the test files)"
  exit 1
}
find packages deploy bench -name '*.test.ts' -not -path '*/node_modules/*' -not -path '*/dist/*' \
  2>/dev/null | sort >"$work/found.txt"
node -e '
  const fs = require("fs");
  const path = require("path");
  const listed = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const projects = new Map();
  for (const { file, projectName } of listed) {
    const rel = path.relative(process.cwd(), file);
    projects.set(rel, [...(projects.get(rel) ?? []), projectName]);
  }
  const found = fs.readFileSync(process.argv[2], "utf8").split("\n").filter(Boolean);
  const orphans = found.filter((f) => !projects.has(f));
  const doubles = [...projects].filter(([, names]) => names.length > 1);
  for (const f of orphans) console.error(`${f}: in no project of vitest.config.ts, so never run`);
  for (const [f, names] of doubles) console.error(`${f}: in several projects (${names.join(", ")})`);
  fs.writeFileSync(process.argv[3], String(orphans.length + doubles.length));
' "$work/listed.json" "$work/found.txt" "$work/uncovered"
uncovered=$(cat "$work/uncovered" 2>/dev/null || echo 1)

# One file at a time across all projects: end-to-end groups share fixed ports (49983 for envd's
# debug mode, 18000 for the test node) and the machine has two cores.
# The deployment tests (Docker, systemd-nspawn, a release) run on their own: npm run test:deploy.
args=("$@")
[[ " $* " == *" --project"* ]] || args+=(--project '!deploy')
npx vitest run --no-file-parallelism --maxWorkers=1 --reporter=default --reporter=json \
  --outputFile.json="$work/report.json" "${args[@]}"
status=$?

# Files that failed without a failing test (an import error, a failing beforeAll) count as one
# failure each, so the line never says "0 failed" for a run that failed.
node -e '
  const fs = require("fs");
  const path = require("path");
  let r;
  try {
    r = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  } catch {
    console.log(`0 passed, 1 failed, 0 skipped (vitest ended with status ${process.argv[2]} and wrote no report)`);
    process.exit(0);
  }
  const brokenFiles = r.testResults.filter(
    (f) => f.status === "failed" && !f.assertionResults.some((a) => a.status === "failed"),
  );
  const failedTests = r.testResults.flatMap((f) =>
    f.assertionResults.filter((a) => a.status === "failed").map((a) => `${path.relative(process.cwd(), f.name)} > ${a.fullName}`),
  );
  for (const f of brokenFiles) console.log(`FAILED ${path.relative(process.cwd(), f.name)}: ${(f.message || "").split("\n")[0]}`);
  for (const t of failedTests) console.log(`FAILED ${t}`);
  const uncovered = Number(process.argv[3]);
  let failed = r.numFailedTests + brokenFiles.length + uncovered;
  let why = uncovered > 0 ? ` (${uncovered} test files in no project or in several, see above)` : "";
  if (failed === 0 && process.argv[2] !== "0") {
    // Errors outside any test (unhandled rejections, a worker that died) fail the run too.
    failed = 1;
    why = ` (vitest ended with status ${process.argv[2]}: see the errors above)`;
  }
  console.log(`${r.numPassedTests} passed, ${failed} failed, ${r.numPendingTests + r.numTodoTests} skipped${why}`);
' "$work/report.json" "$status" "$uncovered"

[ "$uncovered" = 0 ] || exit 1
exit $status
