class ConfigError(Exception):
    pass


def read_port(text):
    try:
        return int(text)
    except ValueError as e:
        raise ConfigError(f"bad port {text!r}") from e


read_port("80a")
