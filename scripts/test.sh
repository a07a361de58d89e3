#!/usr/bin/env bash
# The whole test suite: build, the unit tests, then every end-to-end project in lanes that run
# side by side. Needs root and the packages from scripts/setup.sh. Arguments go to one vitest run
# instead of the lanes (a --project, files). Prints each project's and lane's time, and ends with
# one line "N passed, N failed, N skipped", whatever happened before it.
set -uo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
npm run build --silent || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Lanes: `name instance projects... -- filters...`. Each lane is one vitest process running its
# files one after another, with its own test-node instance (port 18000+N, network tag and range,
# home: see packages/test-support/src/server/server-fixture.ts); a file that needs more nodes
# takes instances N+1..N+9. What must not run at once stays in one lane: envd's debug port 49983
# (envd), the runtime fixture's 10.251/16 namespaces (runtime, snapshot, oci), the network files'
# 10.237/16 ranges (network), the cluster suite's ports 199xx and home /var/lib/aenv-h9 (cluster,
# dashboard, the gateway's security files), and the network files beside the cluster suite (its
# test that sandbox code reaches no host address failed once they ran at once). Two lanes, balanced by the times of their files (the
# summary prints both); on two cores a third lane only slows every lane.
lanes=(
  "a 0 node runtime snapshot oci -- packages/node/test/e2e packages/node/test/runtime packages/node/test/snapshot packages/snapshot/test/e2e packages/oci/test/e2e packages/node/test/oci"
  "b 10 cluster dashboard security scheduler p2p cli network envd -- packages/gateway/ packages/dashboard/ packages/node/test/security packages/scheduler/ packages/p2p/test/e2e packages/node/test/p2p packages/cli/ packages/node/test/network packages/envd/"
)
laned=true
[ $# -gt 0 ] && laned=false
for lane in "${lanes[@]}"; do
  read -r name _ rest <<<"$lane"
  echo "$name $rest"
done >"$work/lanes.txt"

# Every test file must belong to exactly one project of vitest.config.ts (and one lane): a file
# no project includes would never run, and nothing would say so.
npx vitest list --filesOnly --json >"$work/listed.json" 2>"$work/list.err" || {
  cat "$work/list.err" >&2
  echo "0 passed, 1 failed, 0 skipped (vitest could not list the test files)"
  exit 1
}
find packages deploy bench -name '*.test.ts' -not -path '*/node_modules/*' -not -path '*/dist/*' \
  2>/dev/null | sort >"$work/found.txt"
node scripts/test-report.mjs check "$work/listed.json" "$work/found.txt" \
  "$($laned && echo "$work/lanes.txt" || echo -)" "$work/uncovered"
uncovered=$(cat "$work/uncovered" 2>/dev/null || echo 1)

# One vitest run: `name`, then its arguments; leaves `name:status:seconds:report` in $work/runs.
run() {
  local name=$1 t0=$SECONDS
  shift
  npx vitest run --reporter=default --reporter=json --outputFile.json="$work/$name.json" "$@"
  echo "$name:$?:$((SECONDS - t0)):$work/$name.json" >>"$work/runs"
}

if ! $laned; then
  # One file at a time: end-to-end files share fixed ports and the machine's two cores.
  # The deployment tests (Docker, systemd-nspawn, a release) run on their own: npm run test:deploy.
  args=("$@")
  [[ " $* " == *" --project"* ]] || args+=(--project '!deploy')
  run vitest --no-file-parallelism --maxWorkers=1 "${args[@]}"
else
  # The unit tests first, on every core: beside the lanes, their timeouts meet a loaded machine.
  run unit --project unit
  for lane in "${lanes[@]}"; do
    read -r name instance rest <<<"$lane"
    names=() projects=() filters=() seen=false
    for word in $rest; do
      if [ "$word" = -- ]; then seen=true
      elif $seen; then filters+=("$word")
      else names+=("$word") projects+=(--project "$word"); fi
    done
    # Each lane's output is kept apart and shown once the lane ends, so it reads as one run.
    (
      export AENV_TEST_INSTANCE=$instance
      run "$name" --no-file-parallelism --maxWorkers=1 \
        "${projects[@]}" "${filters[@]}" >"$work/$name.out" 2>&1
      echo "=== lane $name (instance $instance: ${names[*]}) ==="
      cat "$work/$name.out"
    ) &
  done
  wait
fi

echo "total: $((SECONDS - started)) s (build and listing included)"
node scripts/test-report.mjs summary "$work/listed.json" "$uncovered" $(cat "$work/runs")
[ "$uncovered" = 0 ] || exit 1
awk -F: '$2 != 0 { bad = 1 } END { exit bad }' "$work/runs"
