"""PTL204 torchvision-pretrained."""
from __future__ import annotations

import libcst as cst

from ptlint.fixers.arguments import argument, keyword
from ptlint.fixers.expressions import parenthesized
from ptlint.model import Safety
from ptlint.rule import Rule

_V1 = "IMAGENET1K_V1"
_VOC = "COCO_WITH_VOC_LABELS_V1"
_KINETICS = "KINETICS400_V1"


def _family(names: str, weights: str) -> dict[str, str]:
    return {name: weights for name in names.split()}


# What `pretrained=True` meant for each builder: torchvision's legacy default
# weights (the *first* weights, not the newer `DEFAULT`). None: the builder had
# no legacy weights (`pretrained=True` raised).
_CLASSIFICATION = {
    **_family(
        "alexnet googlenet inception_v3 maxvit_t mobilenet_v2 mobilenet_v3_large "
        "mobilenet_v3_small squeezenet1_0 squeezenet1_1 "
        "convnext_tiny convnext_small convnext_base convnext_large "
        "densenet121 densenet161 densenet169 densenet201 "
        "efficientnet_b0 efficientnet_b1 efficientnet_b2 efficientnet_b3 efficientnet_b4 "
        "efficientnet_b5 efficientnet_b6 efficientnet_b7 "
        "efficientnet_v2_s efficientnet_v2_m efficientnet_v2_l "
        "mnasnet0_5 mnasnet0_75 mnasnet1_0 mnasnet1_3 "
        "regnet_x_400mf regnet_x_800mf regnet_x_1_6gf regnet_x_3_2gf regnet_x_8gf regnet_x_16gf "
        "regnet_x_32gf regnet_y_400mf regnet_y_800mf regnet_y_1_6gf regnet_y_3_2gf regnet_y_8gf "
        "regnet_y_16gf regnet_y_32gf "
        "resnet18 resnet34 resnet50 resnet101 resnet152 resnext50_32x4d resnext101_32x8d "
        "resnext101_64x4d wide_resnet50_2 wide_resnet101_2 "
        "shufflenet_v2_x0_5 shufflenet_v2_x1_0 shufflenet_v2_x1_5 shufflenet_v2_x2_0 "
        "swin_t swin_s swin_b swin_v2_t swin_v2_s swin_v2_b "
        "vgg11 vgg11_bn vgg13 vgg13_bn vgg16 vgg16_bn vgg19 vgg19_bn "
        "vit_b_16 vit_b_32 vit_l_16 vit_l_32", _V1),
    "vit_h_14": None,
    "regnet_y_128gf": None,
}
_BUILDERS: dict[str, dict[str, str | None]] = {
    "": _CLASSIFICATION,
    "video": _family("r3d_18 mc3_18 r2plus1d_18 s3d mvit_v1_b mvit_v2_s swin3d_t swin3d_s swin3d_b",
                     _KINETICS),
    "segmentation": _family("fcn_resnet50 fcn_resnet101 deeplabv3_resnet50 deeplabv3_resnet101 "
                            "deeplabv3_mobilenet_v3_large lraspp_mobilenet_v3_large", _VOC),
    "detection": _family("fasterrcnn_resnet50_fpn fasterrcnn_resnet50_fpn_v2 "
                         "fasterrcnn_mobilenet_v3_large_fpn fasterrcnn_mobilenet_v3_large_320_fpn "
                         "retinanet_resnet50_fpn retinanet_resnet50_fpn_v2 maskrcnn_resnet50_fpn "
                         "maskrcnn_resnet50_fpn_v2 keypointrcnn_resnet50_fpn fcos_resnet50_fpn "
                         "ssd300_vgg16 ssdlite320_mobilenet_v3_large", "COCO_V1"),
    "optical_flow": {"raft_large": "C_T_SKHT_V2", "raft_small": "C_T_V2"},
    # The legacy weights depend on `quantize=`: reported without a fix.
    "quantization": _family("googlenet inception_v3 mobilenet_v2 mobilenet_v3_large resnet18 "
                            "resnet50 resnext101_32x8d resnext101_64x4d shufflenet_v2_x0_5 "
                            "shufflenet_v2_x1_0 shufflenet_v2_x1_5 shufflenet_v2_x2_0", None),
}
_BACKBONE = {"ssd300_vgg16": "IMAGENET1K_FEATURES"}  # the others: IMAGENET1K_V1
_NAMES = frozenset(name for family in _BUILDERS.values() for name in family)


def _builder(qualified: str | None) -> tuple[str, str] | None:
    """(package, builder name) for `torchvision.models[.package][.module].name`."""
    if not qualified or not qualified.startswith("torchvision.models."):
        return None
    parts = qualified.split(".")[2:]
    package = parts[0] if parts[0] in _BUILDERS and len(parts) > 1 else ""
    name = parts[-1]
    if name not in _BUILDERS[package]:
        return None
    return package, name


def _literal(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


class TorchvisionPretrained(Rule):
    """
    ## What it does
    Flags torchvision model builders called with the deprecated
    `pretrained=` or `pretrained_backbone=` arguments (also `pretrained`
    passed positionally as a literal `True`/`False`), through any import path:
    `torchvision.models.resnet50(pretrained=True)`,
    `models.detection.fasterrcnn_resnet50_fpn(pretrained_backbone=False)`,
    `from torchvision.models.resnet import resnet50`; also a builder chosen
    by name, `models.__dict__[arch](pretrained=True)` or
    `getattr(models, arch)(pretrained=True)` (reported without a fix: the
    weights depend on the builder).

    ## Why is this bad?
    torchvision 0.13 replaced the booleans with `weights=` and
    `weights_backbone=`, which say which weights are loaded (a model can
    have several, and `pretrained=True` silently means the oldest ones). The
    old arguments warn on every call and are slated for removal.

    ## Example
    ```python
    import torchvision
    model = torchvision.models.resnet50(pretrained=True)
    ```

    Use instead:
    ```python
    import torchvision
    model = torchvision.models.resnet50(weights="IMAGENET1K_V1")
    ```

    ## Fix safety
    Safe: the fix passes exactly the weights torchvision's own compatibility
    layer picks for `pretrained=True` (the builder's legacy weights, such as
    `IMAGENET1K_V1`, `COCO_V1` or `IMAGENET1K_FEATURES` for the SSD
    backbone), as the weights' name, which every builder accepts. `False`
    becomes `None`. Any other value `v` becomes `weights="<legacy>" if v else
    None`: torchvision tests the value's truth the same way, and `v` is still
    evaluated once.

    Reported without a fix: quantized models (their legacy weights depend on
    `quantize=`), builders that had no legacy weights (`vit_h_14`,
    `regnet_y_128gf`) unless the value is `False`, calls that also pass
    `weights=`, a positional `pretrained` followed by more positional
    arguments, and `keypointrcnn_resnet50_fpn` with a non-literal value (it
    also accepts `"legacy"`). The rule applies from torch 1.12 (torchvision
    0.13).

    ## References
    - [torchvision multi-weight API](https://pytorch.org/vision/stable/models.html)
    """

    code = "PTL204"
    message = "`pretrained=` is deprecated since torchvision 0.13; use `weights=`"
    fix_title = "Pass `weights=`"
    fix_safety = Safety.SAFE
    requires_text = ("pretrained",)
    torch_versions = ">=1.12"

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, (cst.Call, cst.Subscript)):
            if self._looked_up(node.func):
                for name in ("pretrained", "pretrained_backbone"):
                    if keyword(node, name) is not None:
                        return self.report(node, message=f"`{name}=` is deprecated since "
                                           f"torchvision 0.13; use `weights{name[10:]}=`")
            return
        func = node.func
        if type(func) is cst.Attribute and func.attr.value not in _NAMES:
            return  # (cheap: most calls are not a model builder's)
        found = _builder(self.qualified_name(func))
        if found is None:
            return
        package, name = found
        pretrained = argument(node, "pretrained", 0)
        if pretrained is not None and pretrained.keyword is None and _literal(pretrained.value) is None:
            pretrained = None  # a positional that is not a literal flag may be `weights`
        backbone = keyword(node, "pretrained_backbone")
        if pretrained is None and backbone is None:
            return
        message = self.message if pretrained is not None else (
            "`pretrained_backbone=` is deprecated since torchvision 0.13; use `weights_backbone=`")
        legacy = _BUILDERS[package][name]
        changes: list[tuple[cst.Arg, cst.Arg]] = []
        for old, new_name, weights in (
                (pretrained, "weights", legacy),
                (backbone, "weights_backbone", _BACKBONE.get(name, _V1) if package else None)):
            if old is None:
                continue
            if package == "quantization" or keyword(node, new_name) is not None:
                return self.report(node, message=message)
            if old.keyword is None and len([a for a in node.args if a.keyword is None]) > 1:
                return self.report(node, message=message)
            value = self._weights(old.value, weights, exact=name != "keypointrcnn_resnet50_fpn")
            if value is None:
                return self.report(node, message=message)
            changes.append((old, cst.Arg(
                value=value, keyword=cst.Name(new_name), comma=old.comma,
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")))))
        args = list(node.args)
        for old, new in changes:
            args[args.index(old)] = new
        if pretrained is not None and pretrained.keyword is None:
            # the positional flag is now a keyword: it must follow every other argument
            moved = args.pop(0)
            args = [*args, moved]
            args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in args]
        self.report(node, message=message,
                    replacement=node.with_changes(args=args))

    def _looked_up(self, func: cst.BaseExpression) -> bool:
        """`models.__dict__[arch]`, `getattr(models, arch)`: a builder of
        `torchvision.models` (or one of its packages) chosen by name."""
        if isinstance(func, cst.Subscript):
            table = func.value
            module = table.value if isinstance(table, cst.Attribute) \
                and table.attr.value == "__dict__" else None
        else:
            module = func.args[0].value if self.qualified_name(func.func) == "builtins.getattr" \
                and len(func.args) == 2 else None
        qualified = self.qualified_name(module) if isinstance(
            module, (cst.Name, cst.Attribute)) else None
        return qualified is not None and (qualified == "torchvision.models" or (
            qualified.startswith("torchvision.models.")
            and qualified.split(".")[2] in _BUILDERS))

    def _weights(self, value: cst.BaseExpression, weights: str | None,
                 exact: bool) -> cst.BaseExpression | None:
        literal = _literal(value)
        if literal is False:
            return cst.Name("None")
        if weights is None:
            return None
        name = cst.SimpleString(f'"{weights}"')
        if literal is True:
            return name
        if not exact:
            return None
        return cst.IfExp(test=parenthesized(value), body=name, orelse=cst.Name("None"))
