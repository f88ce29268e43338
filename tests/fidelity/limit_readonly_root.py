# Whether the program may write outside its working directory (checked, nothing written).
import os

print(os.access("/usr", os.W_OK), os.access("/etc", os.W_OK), os.access(".", os.W_OK))
