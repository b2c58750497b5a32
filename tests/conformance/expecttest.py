"""Minimal stand-in for the PyPI-only ``expecttest`` package.

torch.testing._internal.common_utils does ``import expecttest`` and derives its
TestCase from ``expecttest.TestCase``; it also reads/writes ``expecttest.ACCEPT``.
The real package is not installed on this machine (it is not packaged by Debian),
so the conformance driver puts this directory on ``sys.path`` before torch's
testing modules are imported.

Only the checking half of expecttest is provided: ``ACCEPT`` is always False by
default and this module never rewrites test sources.  If something sets ACCEPT
(common_utils does so for ``--accept``), a mismatch still fails the test instead of
editing files.
"""

import unittest

__all__ = ["ACCEPT", "TestCase"]

# The real module reads EXPECTTEST_ACCEPT; we never accept (never rewrite sources).
ACCEPT = False

_HELP_TEXT = (
    "expected output differs (stand-in expecttest: accepting new output "
    "is not supported here)"
)


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):
        """Assert that ``actual`` equals the inline literal ``expect``.

        Same comparison as the real expecttest: a trailing C++ stack trace
        ("\\nException raised from ...") after the expected text is tolerated.
        """
        self.assertMultiLineEqualMaybeCppStack(expect, actual, msg=_HELP_TEXT)

    def assertExpectedRaisesInline(self, exc_type, callable, expect, *args, **kwargs):
        """Like assertExpectedInline, on ``str()`` of the exception ``callable`` raises."""
        try:
            callable(*args, **kwargs)
        except exc_type as e:
            self.assertExpectedInline(str(e), expect, skip=1)
            return
        self.fail(msg="Did not raise when expected to")

    def assertMultiLineEqualMaybeCppStack(self, expect, actual, *args, **kwargs):
        self.assertGreaterEqual(len(actual), len(expect), *args, **kwargs)
        self.assertMultiLineEqual(expect, actual[: len(expect)], *args, **kwargs)
        if len(actual) > len(expect):
            header = "\nException raised from"
            self.assertEqual(actual[len(expect): len(expect) + len(header)], header)
