import sys

print("héllo wörld — ελληνικά — 日本語 — 🐍✓")
print("combining: e\u0301, rtl: שלום", len("🐍"))
print("stderr too: ünïcödé ✗", file=sys.stderr)
print(sys.stdout.encoding, sys.stderr.encoding, sys.getfilesystemencoding())
