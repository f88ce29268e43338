# unittest.main() loads the tests of __main__ and exits with their outcome.
import io
import re
import sys
import unittest


class TestMath(unittest.TestCase):
    def test_add(self):
        self.assertEqual(1 + 1, 2)

    def test_fails(self):
        self.assertEqual(sorted([3, 1, 2]), [1, 2, 4])


if __name__ == "__main__":
    buf = io.StringIO()
    prog = unittest.main(testRunner=unittest.TextTestRunner(stream=buf, verbosity=2), exit=False)
    print(re.sub(r"in \d+\.\d+s", "in Ts", buf.getvalue()), end="")
    sys.exit(not prog.result.wasSuccessful())
