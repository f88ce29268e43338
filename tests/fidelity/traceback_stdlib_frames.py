# The traceback goes through the standard library: Python shows those frames too.
import json


def load(text):
    return json.loads(text)


print(load('{"a": 1}'))
load('{"a": }')
