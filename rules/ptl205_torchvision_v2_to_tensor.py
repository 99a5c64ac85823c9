"""PTL205 torchvision-v2-to-tensor."""
from __future__ import annotations

import libcst as cst

from ptlint.model import Safety
from ptlint.rules._symbols import Spell, Symbol, SymbolRule, table

_V2 = "torchvision.transforms.v2"
_INSTEAD = "v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])"


def _fix_to_tensor(call: cst.Call, spell: Spell) -> cst.BaseExpression | None:
    if call.args:
        return None
    compose, to_image, to_dtype = (spell(f"{_V2}.{n}") for n in ("Compose", "ToImage", "ToDtype"))
    float32 = spell("torch.float32")
    if None in (compose, to_image, to_dtype, float32):
        return None
    dtype = cst.Call(func=to_dtype, args=[
        cst.Arg(float32),
        cst.Arg(cst.Name("True"), keyword=cst.Name("scale"),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")))])
    steps = cst.List([cst.Element(cst.Call(func=to_image)), cst.Element(dtype)])
    return cst.Call(func=compose, args=[cst.Arg(steps)])


class TorchvisionV2ToTensor(SymbolRule):
    """
    ## What it does
    Flags uses and imports of `torchvision.transforms.v2.ToTensor`. The
    version 1 transform, `torchvision.transforms.ToTensor`, is not
    deprecated and is not flagged.

    ## Why is this bad?
    `v2.ToTensor` is deprecated since torchvision 0.16 and will be removed.
    In the v2 API, converting an image to a tensor and scaling it to `[0, 1]`
    are two transforms, `v2.ToImage()` and `v2.ToDtype(torch.float32,
    scale=True)`, which also keep the image's `tv_tensors` type so that later
    v2 transforms treat it as an image.

    ## Example
    ```python
    from torchvision.transforms import v2
    transform = v2.Compose([v2.RandomHorizontalFlip(), v2.ToTensor()])
    ```

    Use instead:
    ```python
    import torch
    from torchvision.transforms import v2
    transform = v2.Compose([
        v2.RandomHorizontalFlip(),
        v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]),
    ])
    ```

    ## Fix safety
    Unsafe. `v2.ToTensor()` is replaced by
    `v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])`
    (adding `import torch` if needed). The result is a `tv_tensors.Image`
    (a `Tensor` subclass) instead of a plain tensor, and a `uint8` tensor
    input is now converted and scaled where `ToTensor` passed it through.
    A bare `ToTensor` imported by name is rewritten to the full
    `torchvision.transforms.v2` path; the import itself is reported, and
    removed once nothing else in the file uses the name (safe; not in an
    `__init__.py`, which may re-export it). The rule applies from torch 2.1
    (torchvision 0.16).

    ## References
    - [torchvision v2 transforms: ToTensor is deprecated](https://pytorch.org/vision/stable/generated/torchvision.transforms.v2.ToTensor.html)
    """

    code = "PTL205"
    message = "`v2.ToTensor` is deprecated; use `v2.ToImage()` and `v2.ToDtype(torch.float32, scale=True)`"
    fix_title = "Use `ToImage` and `ToDtype`"
    fix_safety = Safety.UNSAFE
    requires_text = ("ToTensor",)
    statuses = ("deprecated",)
    symbols = table([Symbol(f"{_V2}.ToTensor", "deprecated", _INSTEAD, since="2.1",
                            fix=_fix_to_tensor, keeps_behaviour=False)])

    def describe(self, symbol: Symbol) -> str:
        return f"`v2.ToTensor` is deprecated since torchvision 0.16; use `{_INSTEAD}`"
