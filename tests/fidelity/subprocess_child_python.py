import subprocess
import sys

r = subprocess.run([sys.executable, "-c", "import sys; print('child', sys.argv[1:])", "x"],
                   capture_output=True, text=True)
print(r.returncode, r.stdout.strip(), repr(r.stderr))
r = subprocess.run([sys.executable, "-c", "raise SystemExit(9)"])
print(r.returncode)
