# %%
DEFAULTS = {"retries": 3, "timeout": 30, "verbose": False}

# %%
user_settings = {"timeout": 10}

# %%
def setting(name):
    return user_settings[name]

# %%
# Every setting, the user's value or else the default
for name in sorted(DEFAULTS):
    print(name, "=", setting(name))
