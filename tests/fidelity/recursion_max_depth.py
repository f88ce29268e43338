# How deep the program can recurse: the limit minus the frames below the program.
def dive(n):
    try:
        return dive(n + 1)
    except RecursionError:
        return n


print(dive(1))
