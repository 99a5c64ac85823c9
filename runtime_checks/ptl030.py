"""PTL030 retain-graph-without-reuse: graphs are freed after each backward."""
CHANGES = {"graphs_kept": "bad keeps every iteration's graph alive; fixed keeps none"}
