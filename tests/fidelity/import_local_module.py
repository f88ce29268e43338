# A module written next to the program is importable; it can import __main__.
import sys

with open("helper_mod.py", "w") as f:
    f.write("import __main__\n\ndef shout():\n    return __main__.WORD.upper()\n")
WORD = "quiet"
import helper_mod  # noqa: E402

print(helper_mod.shout(), helper_mod.__name__)
print(sys.modules["__main__"].WORD)
