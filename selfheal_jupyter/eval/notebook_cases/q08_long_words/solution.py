import re
print(sum(1 for w in re.findall(r"[A-Za-z]+", text) if len(w) > 6))
