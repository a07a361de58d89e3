// The bookkeeping of scripts/test.sh, in two steps:
//   check <listed.json> <found.txt> <lanes.txt> <out>  every test file in exactly one project and,
//                                                      for a full run, in exactly one lane
//   summary <listed.json> <uncovered> <lane>...        per-project and per-lane times, the slowest
//                                                      files, the failures, and the line
//                                                      "N passed, N failed, N skipped"
// A lane is `name:status:seconds:report.json`; lanes.txt has one `name projects... -- filters...`
// line per lane (vitest's file filters: a file is in the lane when its path contains one).
import fs from 'node:fs';
import path from 'node:path';
import { stripVTControlCharacters } from 'node:util';

const rel = (f) => path.relative(process.cwd(), f);

/** file → the names of the projects that include it, from `vitest list --filesOnly --json`. */
function projectsOf(listedJson) {
  const projects = new Map();
  for (const { file, projectName } of JSON.parse(fs.readFileSync(listedJson, 'utf8')))
    projects.set(rel(file), [...(projects.get(rel(file)) ?? []), projectName]);
  return projects;
}

function readLanes(lanesTxt) {
  return fs
    .readFileSync(lanesTxt, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [name, ...rest] = line.split(' ');
      const cut = rest.indexOf('--');
      return { name, projects: rest.slice(0, cut), filters: rest.slice(cut + 1) };
    });
}

function check(listedJson, foundTxt, lanesTxt, out) {
  const projects = projectsOf(listedJson);
  const found = fs.readFileSync(foundTxt, 'utf8').split('\n').filter(Boolean);
  const problems = [];
  for (const f of found)
    if (!projects.has(f)) problems.push(`${f}: in no project of vitest.config.ts, so never run`);
  for (const [f, names] of projects)
    if (names.length > 1) problems.push(`${f}: in several projects (${names.join(', ')})`);
  if (lanesTxt !== '-') {
    // Lanes run side by side: a file in none would never run, a file in two would run twice at once.
    const lanes = readLanes(lanesTxt);
    const laned = new Set(lanes.flatMap((l) => l.projects));
    for (const [f, [project]] of projects) {
      if (project === 'unit' || project === 'deploy') continue;
      if (!laned.has(project)) {
        problems.push(`${f}: project ${project} is in no lane of scripts/test.sh`);
        continue;
      }
      const inLanes = lanes.filter(
        (l) => l.projects.includes(project) && l.filters.some((x) => f.includes(x)),
      );
      if (inLanes.length !== 1)
        problems.push(`${f}: in ${inLanes.length} lanes of scripts/test.sh (${inLanes.map((l) => l.name)})`);
    }
  }
  for (const p of problems) console.error(p);
  fs.writeFileSync(out, String(problems.length));
}

const secs = (ms) => `${Math.round(ms / 1000)} s`;

/** How long each project took: from its first file's start to its last file's end. */
function projectTimes(results, projects) {
  const spans = new Map();
  for (const r of results) {
    const project = projects.get(rel(r.name))?.[0] ?? '?';
    const [start, end] = spans.get(project) ?? [Infinity, 0];
    spans.set(project, [Math.min(start, r.startTime), Math.max(end, r.endTime)]);
  }
  return [...spans].map(([p, [start, end]]) => `${p} ${secs(end - start)}`).join(', ');
}

/** The files that took longest, the first to look at when the run or a lane is too slow. */
function slowestFiles(results, count = 10) {
  return [...results]
    .sort((a, b) => b.endTime - b.startTime - (a.endTime - a.startTime))
    .slice(0, count)
    .map((r) => `${rel(r.name)} ${secs(r.endTime - r.startTime)}`)
    .join(', ');
}

/** What a lane printed (scripts/test.sh keeps it beside the lane's report), or '' if not kept. */
function laneOutput(report) {
  try {
    return stripVTControlCharacters(fs.readFileSync(report.replace(/\.json$/, '.out'), 'utf8'));
  } catch {
    return '';
  }
}

/**
 * The error of a file's failing describe block (a beforeAll that threw), which vitest's JSON
 * report leaves out: the first line after the file's "FAIL" line in the lane's own output.
 */
function suiteError(output, file) {
  const lines = output.split('\n');
  const at = lines.findIndex((l) => /^\s*FAIL\s/.test(l) && l.includes(`${file} >`));
  const error = at < 0 ? undefined : lines.slice(at + 1).find((l) => l.trim());
  return error?.trim() ?? "a hook failed (see the lane's output above)";
}

function summary(listedJson, uncoveredCount, lanes) {
  const projects = projectsOf(listedJson);
  let passed = 0;
  let failed = Number(uncoveredCount);
  let skipped = 0;
  const why = [];
  const results = [];
  const times = [];
  for (const lane of lanes) {
    const [name, status, seconds, report] = lane.split(':');
    let r;
    try {
      r = JSON.parse(fs.readFileSync(report, 'utf8'));
    } catch {
      failed++;
      why.push(`${name}: vitest ended with status ${status} and wrote no report`);
      times.push(`${name} ${seconds} s`);
      continue;
    }
    // Files that failed without a failing test (an import error, a failing beforeAll) count as
    // one failure each, so the line never says "0 failed" for a run that failed.
    const broken = r.testResults.filter(
      (f) => f.status === 'failed' && !f.assertionResults.some((a) => a.status === 'failed'),
    );
    let output;
    for (const f of broken)
      console.log(
        `FAILED ${rel(f.name)}: ${f.message?.split('\n')[0] || suiteError((output ??= laneOutput(report)), rel(f.name))}`,
      );
    for (const f of r.testResults)
      for (const a of f.assertionResults)
        if (a.status === 'failed') console.log(`FAILED ${rel(f.name)} > ${a.fullName}`);
    let laneFailed = r.numFailedTests + broken.length;
    if (laneFailed === 0 && status !== '0') {
      // Errors outside any test (unhandled rejections, a worker that died) fail the run too.
      laneFailed = 1;
      why.push(`${name}: vitest ended with status ${status}, see the errors above`);
    }
    passed += r.numPassedTests;
    failed += laneFailed;
    skipped += r.numPendingTests + r.numTodoTests;
    results.push(...r.testResults);
    times.push(`${name} ${seconds} s`);
  }
  if (Number(uncoveredCount) > 0)
    why.unshift(`${uncoveredCount} test files in no project or lane, or in several, see above`);
  console.log(`projects: ${projectTimes(results, projects)}`);
  console.log(`lanes: ${times.join(', ')}`);
  console.log(`slowest files: ${slowestFiles(results)}`);
  console.log(
    `${passed} passed, ${failed} failed, ${skipped} skipped${why.length ? ` (${why.join('; ')})` : ''}`,
  );
}

const [step, ...args] = process.argv.slice(2);
if (step === 'check') check(...args);
else if (step === 'summary') summary(args[0], args[1], args.slice(2));
else throw new Error(`unknown step ${step}`);
