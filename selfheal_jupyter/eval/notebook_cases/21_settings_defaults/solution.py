def setting(name):
    return user_settings.get(name, DEFAULTS[name])


# Every setting, the user's value or else the default
for name in sorted(DEFAULTS):
    print(name, "=", setting(name))
