"""PTL112 log-sum-exp: the same values where the naive form is finite, and a
finite value where it overflows."""
CHANGES = {"overflow": "log(sum(exp(x))) overflows to inf for large x; logsumexp stays finite"}
