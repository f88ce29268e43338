# Under the C.UTF-8 locale the standard streams use surrogateescape: a lone surrogate
# from a file name is written back as its byte.
print("before")
print("bad: \udcff")
