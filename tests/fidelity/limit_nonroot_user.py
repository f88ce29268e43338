import os

print(os.getuid(), os.getgid(), os.geteuid() == 0)
