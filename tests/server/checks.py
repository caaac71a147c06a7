"""The suite scripts' check lines: "ok   WHAT" / "FAIL WHAT: DETAIL", and the
closing "NAME: N passed, N failed" line that tests/server/run-tests adds up."""
import sys

counts = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    if ok:
        counts["passed"] += 1
        print("ok   " + what)
    else:
        counts["failed"] += 1
        print("FAIL " + what + (": " + detail if detail else ""))
    sys.stdout.flush()


def summary(name):
    """Print the closing line; the exit status for sys.exit."""
    print("%s: %d passed, %d failed" % (name, counts["passed"], counts["failed"]))
    return 1 if counts["failed"] else 0
