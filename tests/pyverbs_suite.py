# SPDX-License-Identifier: MIT
"""
pyverbs_suite.py TESTDIR DEVICE: run rdma-core's Python test suite (a
private, writable copy of it in TESTDIR) on DEVICE, as run_tests.py
does, with three differences:

  - the tests listed in EXCLUDED below are reported as skipped with the
    reason given there instead of being run;
  - each skip reason is printed once with the number of tests that gave
    it, sorted by count, and the test classes they belong to
    ("# skip  N  reason  [module.Class, ...]");
  - the last line is "pyverbs: N passed, N failed, N errors, N skipped".

Exit status 0 when nothing failed and nothing raised an error, else 1.
"""
import collections
import importlib.machinery
import os
import sys
import unittest

# Test ids (or prefixes ending in '.') that a software RoCE device can
# never pass, with the reason; docs/compatibility.md lists them too.
EXCLUDED = {
}


def excluded_reason(test_id):
    """The reason test_id is excluded, or None."""
    for key, reason in EXCLUDED.items():
        if test_id == key or (key.endswith('.') and test_id.startswith(key)):
            return reason
    return None


def flatten(suite):
    """Every test case of a (nested) suite, in order."""
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def skipper(reason):
    """A replacement test method that skips with `reason`."""
    def skip(self):
        raise unittest.SkipTest(reason)
    return skip


def main():
    if len(sys.argv) != 3:
        print('usage: pyverbs_suite.py TESTDIR DEVICE', file=sys.stderr)
        return 2
    testdir, dev = sys.argv[1], sys.argv[2]
    sys.path.insert(0, testdir)
    # what run_tests.py does: args_parser sees the device, the package
    # "tests" is loaded from the copy and imports every test_*.py
    sys.argv[1:] = ['--dev', dev]
    from args_parser import parser
    parser.parse_args()
    tests = importlib.machinery.SourceFileLoader(
        'tests', os.path.join(testdir, '__init__.py')).load_module()
    suite = unittest.defaultTestLoader.loadTestsFromModule(tests)

    cases = list(flatten(suite))
    for case in cases:
        reason = excluded_reason(case.id())
        if reason:
            name = case.id().rsplit('.', 1)[1]
            setattr(case, name, skipper('excluded by softverbs: ' + reason).__get__(case))
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2)
    result = runner.run(unittest.TestSuite(cases))

    reasons = collections.Counter(r for _, r in result.skipped)
    classes = collections.defaultdict(list)
    for test, r in result.skipped:
        cls = test.id().rsplit('.', 1)[0].replace('tests.', '', 1)
        if cls not in classes[r]:
            classes[r].append(cls)
    for reason, n in sorted(reasons.items(), key=lambda x: (-x[1], x[0])):
        print('# skip %3d  %s  [%s]' % (n, reason, ', '.join(classes[reason])))
    failed = len(result.failures) + len(result.unexpectedSuccesses)
    errors = len(result.errors)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - errors - skipped
    print('pyverbs: %d passed, %d failed, %d errors, %d skipped' %
          (passed, failed, errors, skipped))
    return 0 if failed == 0 and errors == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
