"""Run the framework scenarios of make test-frameworks and sum their cases.

  run.py <env-dir> <log-dir> <timeout-seconds> <scenario.py>...

Each scenario is started once, with <env-dir>'s interpreter and no
libsalus (its jobs get it: tests/frameworks/fwlib.py), its output in
<log-dir>/<name>.log.  Its cases print PASS, FAIL or SKIP lines, which are
counted; a scenario that dies, hangs past the timeout or exits non-zero with
no FAIL line counts as one failure more, so nothing is lost from the
summary.  Without a ready environment (<env-dir>/.ready, written last by
mk/fwenv.sh) every scenario is one skip with that reason, or one failure
when CI=true: CI must build it.  The last line is the one of
mk/run-tests.sh:
  N passed, N failed, N skipped
and the exit status is 0 only when nothing failed.

Runs with Debian's python3 (the standard library only).
"""
import os
import shutil
import subprocess
import sys
import time


def scenario_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def no_env(env, scenarios):
    ci = os.environ.get("CI") == "true"
    why = "no frameworks environment at %s (mk/fwenv.sh failed: see its output above)" % env
    for s in scenarios:
        print("%-28s %s: %s" % (scenario_name(s), "FAILED" if ci else "skipped", why))
    return (0, len(scenarios), 0) if ci else (0, 0, len(scenarios))


def run_one(python, logdir, limit, path):
    name = scenario_name(path)
    log = os.path.join(logdir, name + ".log")
    start = time.monotonic()
    timed_out = False
    tmp = os.path.join(logdir, name)          # its jobs' files: kept for a look after
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    env = dict(os.environ, FW_TMP=tmp)
    with open(log, "wb") as f:
        p = subprocess.Popen([python, path], stdout=f, stderr=subprocess.STDOUT, env=env,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, 9)              # its jobs are in its session
            rc = p.wait()
    text = open(log, errors="replace").read()
    lines = [l for l in text.splitlines() if l.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP")]
    ok = sum(l.startswith("PASS") for l in lines)
    bad = sum(l.startswith("FAIL") for l in lines)
    skip = sum(l.startswith("SKIP") for l in lines)
    why = ""
    if timed_out:
        why = " (timed out after %ds)" % limit
    elif rc < 0:
        why = " (killed by signal %d)" % -rc
    # FW_CASES may pick no case of a scenario: a clean exit with no line is
    # then nothing run, not a failure (without FW_CASES it is one).
    unpicked = not lines and rc == 0 and not timed_out and os.environ.get("FW_CASES")
    if unpicked:
        why = " (no case picked by FW_CASES)"
    elif (rc != 0 and bad == 0) or not lines:
        bad += 1
    status = "FAILED" if bad else "ok"
    print("%-28s %3d passed %3d failed %3d skipped %4ds  %s%s"
          % (name, ok, bad, skip, time.monotonic() - start, status, why))
    for l in lines:
        if not l.startswith("PASS"):
            print("    " + l)
    if bad and not any(l.startswith("FAIL") for l in lines):
        for l in text.splitlines()[-30:]:
            print("    | " + l)
    sys.stdout.flush()
    return ok, bad, skip


def main():
    env, logdir, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    scenarios = sys.argv[4:]
    os.makedirs(logdir, exist_ok=True)
    python = os.path.join(env, "bin", "python")
    if not os.path.exists(os.path.join(env, ".ready")):
        passed, failed, skipped = no_env(env, scenarios)
    else:
        passed = failed = skipped = 0
        for s in scenarios:
            ok, bad, skip = run_one(python, logdir, limit, s)
            passed, failed, skipped = passed + ok, failed + bad, skipped + skip
    if failed:
        print("failing scenarios' logs in %s" % logdir)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
