"""PTL030 retain-graph-without-reuse."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import keyword, without_keywords
from ptlint.analysis.dataflow import assignments, closure, loss_keys
from ptlint.analysis.semantic import BACKPROP, BACKWARD, Loop
from ptlint.model import Safety
from ptlint.rule import Rule


class RetainGraphWithoutReuse(Rule):
    """
    ## What it does
    Flags `loss.backward(retain_graph=True)` inside a loop when nothing
    backpropagates again later in the same iteration: no other `.backward()`,
    `torch.autograd.grad(...)` or `backward_*()` helper follows it in the
    loop body.

    It stays silent when the loss may depend on a tensor built before the
    loop (a plain name that the loop reads but never assigns, such as an
    embedding computed once, or the output `y` of `y.backward(mask)` whose
    rows are taken one by one): backpropagating through that part again on the
    next iteration legitimately needs the graph. It also stays silent when
    `create_graph=` is passed (higher-order gradients).

    ## Why is this bad?
    `retain_graph=True` keeps every intermediate activation the backward pass
    needs alive after the pass, until the graph itself is dropped. When no
    second backward pass comes, that is pure memory overhead: the previous
    step's activations are still held while the next forward builds its own.
    It is often added to silence "Trying to backward through the graph a
    second time", which usually means a tensor (an RNN hidden state, a
    running statistic) carries the graph from one iteration into the next;
    then every step backpropagates through all earlier steps too, and memory
    and time grow without bound. Detach the carried tensor instead.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
    ```

    Use instead:
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix drops `retain_graph=True`. If the graph really is reused,
    typically because a tensor carries it into the next iteration, the next
    backward pass raises "Trying to backward through the graph a second
    time"; detach that tensor at the start of each iteration.

    ## References
    - [`torch.Tensor.backward`](https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html)
    - [Autograd mechanics: saved tensors](https://pytorch.org/docs/stable/notes/autograd.html#saved-tensors)
    """

    code = "PTL030"
    message = "`retain_graph=True` but nothing backpropagates through the graph again in this iteration"
    fix_title = "Remove `retain_graph=True`"
    fix_safety = Safety.UNSAFE
    requires_text = ("retain_graph",)
    semantic = True

    def leave_Module(self, node: cst.Module) -> None:
        for function in self.model.functions:
            for root in function.loops:
                if root.parent is None:
                    self._check(root)

    def _check(self, root: Loop) -> None:
        sites = [s for loop in root.walk() for s in loop.sites]
        last = max((s.order for s in sites if s.kind in (BACKWARD, BACKPROP)), default=0)
        assigned = None
        for site in sorted(sites, key=lambda s: s.order):
            call = site.node
            retain = keyword(call, "retain_graph") if site.kind == BACKWARD and isinstance(
                call.func, cst.Attribute) else None
            if retain is None or not (isinstance(retain.value, cst.Name) and retain.value.value
                                      == "True") or keyword(call, "create_graph") is not None:
                continue
            if any(a.star for a in call.args) or site.order < last:
                continue  # `**kw` may hold `create_graph=`; a later backward may reuse the graph
            if assigned is None:
                assigned = assignments(root.events, root.function.resolve)
            if not _reads_from_before_the_loop(loss_keys(call), assigned):
                self.report(call, replacement=without_keywords(call, "retain_graph"))


def _reads_from_before_the_loop(losses: set[str], assigns: list) -> bool:
    """Whether the loss is computed, through the loop's assignments, from a
    plain lower-case name that the loop never assigns (a tensor built before
    the loop may hold a graph the next iteration backpropagates through)."""
    assigned = {k for a in assigns for k in a.targets}
    flows = [a for a in assigns if not a.host and not a.fresh]
    seen = closure(set(losses), [(a.targets, a.reads) for a in flows])
    outer = (losses - assigned) | {r for a in flows if a.targets & seen
                                   for r in a.reads & a.bare - assigned}
    return any(not name.isupper() for name in outer if "." not in name)
