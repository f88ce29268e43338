# 600 MB in one allocation (bytes(n) is lazily zeroed memory: cheap where it is allowed).
block = bytes(600 * 2**20)
print("allocated", len(block) >> 20, "MB")
