"""PTL232 legacy-loss-reduction."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import argument, has_star_args, with_keyword, without_keywords
from ptlint.model import Safety
from ptlint.rule import Rule

# The losses that still take `size_average` and `reduce`, with the positions of
# those two parameters: modules of `torch.nn`, then functions of
# `torch.nn.functional`.
_MODULES = {
    "BCELoss": (1, 2), "BCEWithLogitsLoss": (1, 2), "CosineEmbeddingLoss": (1, 2),
    "CrossEntropyLoss": (1, 3), "HingeEmbeddingLoss": (1, 2), "KLDivLoss": (0, 1),
    "L1Loss": (0, 1), "MSELoss": (0, 1), "MarginRankingLoss": (1, 2),
    "MultiLabelMarginLoss": (0, 1), "MultiLabelSoftMarginLoss": (1, 2),
    "MultiMarginLoss": (3, 4), "NLLLoss": (1, 3), "PoissonNLLLoss": (2, 4),
    "SmoothL1Loss": (0, 1), "SoftMarginLoss": (0, 1), "TripletMarginLoss": (4, 5),
}
_FUNCTIONS = {
    "binary_cross_entropy": (3, 4), "binary_cross_entropy_with_logits": (3, 4),
    "cosine_embedding_loss": (4, 5), "cross_entropy": (3, 5), "hinge_embedding_loss": (3, 4),
    "kl_div": (2, 3), "l1_loss": (2, 3), "margin_ranking_loss": (4, 5), "mse_loss": (2, 3),
    "multi_margin_loss": (5, 6), "multilabel_margin_loss": (2, 3),
    "multilabel_soft_margin_loss": (3, 4), "nll_loss": (3, 5), "poisson_nll_loss": (4, 6),
    "smooth_l1_loss": (2, 3), "soft_margin_loss": (2, 3), "triplet_margin_loss": (7, 8),
}
# and the losses that take `reduction=` only
_REDUCTION_ONLY = {"HuberLoss": None, "GaussianNLLLoss": None, "huber_loss": None,
                   "gaussian_nll_loss": None}
_LOSSES: dict[str, tuple[int, int] | None] = {
    **{f"{prefix}.{name}": at for name, at in {**_MODULES, **_REDUCTION_ONLY}.items()
       if name[0].isupper() for prefix in ("torch.nn", "torch.nn.modules.loss")},
    **{f"torch.nn.functional.{name}": at for name, at in {**_FUNCTIONS, **_REDUCTION_ONLY}.items()
       if name[0].islower()},
}
# losses that reject "elementwise_mean" (a ValueError) where the others warn and average
_REJECT_ELEMENTWISE_MEAN = frozenset({
    "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss",
    "multilabel_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss"})
_LITERALS = {"True": True, "False": False, "None": None}


class LegacyLossReduction(Rule):
    """
    ## What it does
    Flags a loss (`nn.CrossEntropyLoss(...)`, `F.nll_loss(...)` and the
    other losses of `torch.nn` and `torch.nn.functional`) given
    `size_average=` or `reduce=`, by keyword or by position. A literal
    `None` (the default) is not flagged. Also `reduction="elementwise_mean"`,
    the name `"mean"` had before PyTorch 1.0, and a reduction's name given to
    a legacy flag (`reduce="sum"`): torch reads any non-empty string as
    `True`, so that loss is a mean.

    ## Why is this bad?
    Both arguments were replaced by `reduction=` in PyTorch 0.4.1; every
    call still warns "size_average and reduce args will be deprecated", and
    the pair is hard to read: `size_average=False` sums, `reduce=False`
    returns one loss per element whatever `size_average` says, and either
    one, when given, overrides a `reduction=` passed beside it.

    ## Example
    ```python
    import torch.nn as nn
    criterion = nn.MSELoss(size_average=False)
    ```

    Use instead:
    ```python
    import torch.nn as nn
    criterion = nn.MSELoss(reduction="sum")
    ```

    ## Fix safety
    Safe. Where both arguments are literals (`True`, `False`, `None`), or
    `reduce=False` whatever `size_average` is, the fix passes the
    `reduction=` that torch derives from them (`"mean"`, the default, is
    left out) and removes them; torch computes the loss through the same
    path. `kl_div` then warns that `"mean"` is not `"batchmean"` where it
    warned about `size_average` before. Other calls (a variable, legacy
    arguments by position, `**kwargs`) are reported without a fix.
    `"elementwise_mean"` becomes `"mean"`: the same loss, bit for bit, where
    torch accepts it (with a warning); unsafe for the three losses that reject
    it with a `ValueError` (`MultiLabelSoftMarginLoss`, `PoissonNLLLoss`,
    `GaussianNLLLoss` and their functions), whose call then runs.
    `reduce="sum"` (or `size_average="none"`) becomes `reduction="sum"`:
    unsafe, since it computes what the string asked for, not the mean it
    computed; `reduce="mean"` becomes `reduction="mean"`, the same loss.

    ## References
    - [torch.nn loss functions](https://pytorch.org/docs/stable/nn.html#loss-functions)
    """

    code = "PTL232"
    message = "`size_average=`/`reduce=` are deprecated: use `reduction=`"
    fix_title = "Pass `reduction=` instead"
    fix_safety = Safety.SAFE
    requires_text = ("size_average", "reduce", "elementwise_mean")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return
        if isinstance(func, cst.Attribute) and not any(
                func.attr.value in names for names in (_MODULES, _FUNCTIONS, _REDUCTION_ONLY)):
            return
        qualified = self.qualified_name(func) or ""
        if qualified not in _LOSSES:
            return
        at = _LOSSES[qualified]
        legacy = [argument(node, "size_average", at[0]), argument(node, "reduce", at[1])] \
            if at is not None else []
        if self._meant_reduction(node, legacy):
            return
        if all(arg is None or _literal(arg) is None for arg in legacy):
            self._elementwise_mean(node, qualified)  # not given, or the default `None`
            return
        reduction = _reduction(*legacy)
        if reduction is None or has_star_args(node) or any(
                arg is not None and arg.keyword is None for arg in legacy):
            self.report(node)
            return
        new = without_keywords(node, "size_average", "reduce")
        if reduction != "mean":
            new = with_keyword(new, "reduction", f'"{reduction}"')
        elif argument(node, "reduction") is not None:
            new = without_keywords(new, "reduction")  # the legacy pair overrode it
        self.report(node, message=f'`size_average=`/`reduce=` are deprecated: use '
                                  f'`reduction="{reduction}"`', replacement=new)


    def _meant_reduction(self, node: cst.Call, legacy: list[cst.Arg | None]) -> bool:
        """`reduce="sum"`: a reduction's name given to the legacy flag, which torch
        reads as `True` (a mean); reported, with `reduction=` as the fix."""
        given = [arg for arg in legacy if arg is not None]
        if len(given) != 1 or given[0].keyword is None or argument(node, "reduction") is not None:
            return False
        value = given[0].value
        text = value.evaluated_value if isinstance(value, cst.SimpleString) else None
        if text not in ("mean", "sum", "none"):
            return False
        flag = given[0].keyword.value
        what = "the same" if text == "mean" else "a mean"
        self.report(node, message=(
            f'`{flag}="{text}"` is not `reduction="{text}"`: torch reads the string as `True` '
            f'and computes {what}'),
            safety=Safety.SAFE if text == "mean" else Safety.UNSAFE,
            replacement=with_keyword(without_keywords(node, flag), "reduction",
                                     value.value),
            fix_title=f'Pass `reduction="{text}"`')
        return True

    def _elementwise_mean(self, node: cst.Call, qualified: str) -> None:
        """`reduction="elementwise_mean"`, the name "mean" had before PyTorch 1.0."""
        given = argument(node, "reduction")
        value = given.value if given is not None else None
        if not (isinstance(value, cst.SimpleString) and value.evaluated_value == "elementwise_mean"):
            return
        quote = value.value[-1]
        safety = Safety.UNSAFE if qualified.rpartition(".")[2] in _REJECT_ELEMENTWISE_MEAN \
            else Safety.SAFE
        self.report(node, message='`reduction="elementwise_mean"` is deprecated: use '
                                  '`reduction="mean"`', safety=safety,
                    replacement=with_keyword(node, "reduction", f"{quote}mean{quote}"))


def _literal(arg: cst.Arg) -> bool | None | str:
    """`True`, `False` or `None` for those literals; "?" for anything else."""
    value = arg.value
    return _LITERALS.get(value.value, "?") if isinstance(value, cst.Name) else "?"


def _reduction(size_average: cst.Arg | None, reduce: cst.Arg | None) -> str | None:
    """What torch derives from the pair (`_Reduction.legacy_get_string`), or None
    when a value that matters is not a literal."""
    reduces = True if reduce is None or _literal(reduce) is None else _literal(reduce)
    if reduces is False:
        return "none"  # whatever `size_average` is
    averages = True if size_average is None or _literal(size_average) is None else _literal(
        size_average)
    if "?" in (reduces, averages):
        return None
    return "mean" if averages else "sum"
