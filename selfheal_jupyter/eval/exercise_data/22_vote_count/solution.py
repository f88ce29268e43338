# Exercise 22 - Election
# ----------------------
# `tally(votes)` returns a dict {candidate: number of votes}.
# `winner(votes)` returns the candidate with the most votes, or None when two or
# more candidates share the highest count (or there are no votes).
#
# The checks at the end are part of the exercise: do not change them.

votes = ["ana", "bo", "ana", "cy", "bo", "ana"]


def tally(votes):
    counts = {}
    for v in votes:
        # TODO: count every vote
        counts[v] = counts.get(v, 0) + 1
    return counts


def winner(votes):
    counts = tally(votes)
    if not counts:
        return None
    best = max(counts.values())
    leaders = [c for c in counts if counts[c] == best]
    if len(leaders) > 1:
        return None
    return leaders[0]


print(tally(votes), winner(votes))

# checks (do not change)
assert tally(votes) == {"ana": 3, "bo": 2, "cy": 1}
assert winner(votes) == "ana"
assert winner(["x", "y"]) is None
assert winner([]) is None
