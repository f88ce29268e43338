"""The class service (`selfheal service`) and its client: the loop, the sandbox and the policy run where the student cannot reach them."""
