# %%
import math
import pandas as pd

# %%
# Survey answers; some people skipped the score question
survey = pd.DataFrame({
    "respondent": ["r1", "r2", "r3", "r4", "r5", "r6"],
    "score": [8, None, 7, 9, None, 6],
})

# %%
# Average score of the people who answered
avg = sum(survey["score"]) / len(survey)
print(f"average: {avg:.2f}")
assert not math.isnan(avg)
