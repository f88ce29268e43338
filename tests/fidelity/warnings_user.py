import warnings


def risky(i):
    warnings.warn("this is risky", UserWarning)
    return i


for i in range(3):
    risky(i)
warnings.warn("another one", RuntimeWarning, stacklevel=1)
print("done")
