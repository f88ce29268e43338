# DeprecationWarning is shown when triggered by code in __main__ itself.
import warnings


def old_api():
    warnings.warn("old_api is deprecated", DeprecationWarning, stacklevel=2)


old_api()
warnings.warn("module-level deprecation", DeprecationWarning)
warnings.warn("pending", PendingDeprecationWarning)
print([(f[0], f[2].__name__) for f in warnings.filters])
