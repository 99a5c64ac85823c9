"""Device-placement rules (PTL101, PTL102) and others (PTL032, PTL122, PTL130,
PTL132) where a fixture file cannot show the behaviour: whole-file conditions, several rules fixing together, notebooks and
test files. Through the command line, as a user runs it."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def codes(proc) -> list[tuple[int, str]]:
    return [(f["location"]["line"], f["code"]) for f in json.loads(proc.stdout)]


MOVES = """\
    import torch

    def make(device, n):
        return torch.zeros(n).long().to(device)
    """


def test_ptl101_silent_where_the_file_changes_the_default_device(cli, tmp_path):
    moved = write(tmp_path / "moved.py", MOVES)
    assert codes(cli(str(moved), "--select", "PTL101", "--output-format", "json")) == [
        (4, "PTL101")]
    for setting in ('torch.set_default_device("cuda")',
                    "torch.set_default_tensor_type(torch.cuda.FloatTensor)"):
        other = write(tmp_path / "default.py", MOVES + setting + "\n")
        proc = cli(str(other), "--select", "PTL101", "--output-format", "json")
        assert proc.returncode == 0 and codes(proc) == [], setting


def test_ptl101_a_move_just_after_the_creation_at_module_level_or_after_a_local_import(
        cli, tmp_path):
    # the two statements are checked once their block's imports resolve
    script = write(tmp_path / "script.py", """\
        import torch

        grid = torch.rand(5, 4)
        grid = grid.cuda()


        def make(n):
            import torch as T
            mask = T.ones(n)
            mask = mask.to("cuda")
            return mask
        """)
    assert codes(cli(str(script), "--select", "PTL101", "--output-format", "json")) == [
        (4, "PTL101"), (10, "PTL101")]


def test_ptl102_silent_for_a_model_a_file_that_trains_nothing_lends_to_an_imported_helper(
        cli, tmp_path):
    # a script that loads weights and mines neighbours with a helper of its project: the
    # helper gets no optimizer, and setting a part through `.module` runs nothing
    mine = """\
        import torch
        from utils.utils import fill_memory_bank, get_model
        from utils.train import train_model


        def main(p, loader, bank):
            model = torch.nn.DataParallel(get_model(p))
            model = model.cuda()
            model.load_state_dict(torch.load(p["ckpt"]))
            torch.save(model.module.state_dict(), p["out"])
            model.module.contrastive_head = torch.nn.Identity()
            fill_memory_bank(loader, model, bank)
        """
    script = write(tmp_path / "mine.py", mine)
    assert codes(cli(str(script), "--select", "PTL102", "--output-format", "json")) == []
    # handed to an imported function named for training, or in a file that trains
    for changed in (mine.replace("fill_memory_bank(loader", "train_model(loader"),
                    mine + "    bank.loss.backward()\n"):
        script = write(tmp_path / "mine.py", changed)
        assert codes(cli(str(script), "--select", "PTL102", "--output-format", "json")) == [
            (7, "PTL102")], changed


ENDS = """\
    import sys
    import torch
    import torch.nn as nn

    def test_epoch(model, loader):
        model.eval()
        with torch.no_grad():
            return [model(x) for x in loader]

    def main(model, loader, optimizer, test_only):
        if test_only:
            model = nn.DataParallel(model)
            test_epoch(model, loader)
            sys.exit(0)
        wrapper = model
        for x in loader:
            optimizer.zero_grad()
            wrapper(x).sum().backward()
            optimizer.step()
        model = nn.DataParallel(model)
        test_epoch(model=model, loader=loader)
    """


def test_ptl102_sees_where_the_wrapped_name_lives(cli, tmp_path):
    # a branch that ends the program keeps its wrap to itself; a use before the wrap
    # (outside loops) sees the model itself; `model=` names a parameter, not the model
    script = write(tmp_path / "ends.py", ENDS)
    assert codes(cli(str(script), "--select", "PTL102", "--output-format", "json")) == []
    for changed, lines in (
            (ENDS.replace("        sys.exit(0)\n", ""), [12, 19]),  # both reach `wrapper`
            (ENDS.replace("        sys.exit(0)\n", "        print()\n"), [12, 20]),
            (ENDS.replace("        sys.exit(0)\n", "        return\n"), []),
            # in a loop, the use may come after the wrap of the iteration before
            (ENDS.replace("        wrapper = model\n        for x in loader:\n",
                          "        for x in loader:\n            wrapper = model\n"), [20]),
            (ENDS.replace("test_epoch(model=model, loader=loader)", "model(loader)"), [20])):
        script = write(tmp_path / "ends.py", changed)
        found = codes(cli(str(script), "--select", "PTL102", "--output-format", "json"))
        assert found == [(line, "PTL102") for line in lines], changed


def test_ptl102_the_wrappers_train_mode_does_not_run_it(cli, tmp_path):
    # a file that trains, and a validation that puts its own wrap in either mode:
    # `.train()` sets a mode, and every run of the wrap is under `no_grad`
    script = write(tmp_path / "manager.py", """\
        import torch
        import torch.nn as nn


        def train_one_epoch(model, loader, optimizer):
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()


        def validate(net, loader, train_mode=False):
            net = nn.DataParallel(net)
            if train_mode:
                net.train()
            else:
                net.eval()
            with torch.no_grad():
                return [net(x) for x, _ in loader]
        """)
    assert codes(cli(str(script), "--select", "PTL102", "--output-format", "json")) == []
    run = script.read_text().replace("    with torch.no_grad():\n        return", "    return")
    write(tmp_path / "manager.py", run)
    assert codes(cli(str(script), "--select", "PTL102", "--output-format", "json")) == [
        (13, "PTL102")]


def test_ptl102_a_file_that_trains_nothing_hands_the_model_to_methods(cli, tmp_path):
    # an in-process sharder of one example's bounds: no optimizer in the file, so the
    # method it is handed to evaluates it; one that keeps it, or a file that trains, may not
    script = """\
    import torch.nn as nn

    def bounds(dual_net, layers, found):
        shards = nn.DataParallel(nn.Sequential(*dual_net))
        for layer in layers:
            found = found + layer.{method}(network=shards)
        return found
    """
    for method in ("bounds", "append", "train_step"):
        write(tmp_path / f"{method}.py", script.format(method=method))
    write(tmp_path / "trains.py", script.format(method="bounds") + "\n    found.backward()\n")
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "append.py", "train_step.py", "trains.py"]


SAMPLER = """\
    import argparse
    import copy
    import torch
    from torch import nn
    from gan.checkpoints import CheckpointIO
    from gan.eval import Evaluator
    from gan.models import build

    args = argparse.ArgumentParser().parse_args()
    generator, discriminator = build(args)
    generator = nn.DataParallel(generator.cuda())
    discriminator = nn.DataParallel(discriminator.cuda())
    checkpoints = CheckpointIO()
    checkpoints.register_modules(generator=generator, discriminator=discriminator)
    generator_test = copy.deepcopy(generator)
    evaluator = Evaluator(generator_test)
    checkpoints.load(args.model)
    with torch.no_grad():
        samples = generator_test(torch.randn(8, 128))
    """


def test_ptl102_silent_for_a_program_that_trains_nothing(cli, tmp_path):
    # a sampling script: the wraps only let a checkpoint with `module.` keys load
    write(tmp_path / "sample.py", SAMPLER)
    # not a program (a module others import), a callable named for training, `.train(`
    write(tmp_path / "library.py", SAMPLER.replace(
        "args = argparse.ArgumentParser().parse_args()", "args = None"))
    write(tmp_path / "trainer.py", SAMPLER + "train_gan(generator, discriminator)\n")
    write(tmp_path / "mode.py", SAMPLER + "generator.train()\n")
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    found = sorted((line.split(":")[0], line.split(":")[1]) for line in proc.stdout.splitlines()
                   if "PTL102" in line)
    assert found == [(name, line) for name in ("library.py", "mode.py", "trainer.py")
                     for line in ("11", "12")]


FEATURES = """\
    import torch
    import torch.nn as nn

    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()

    def features(model, loader, device):
        parallel = nn.DataParallel(model).to(device).eval()
        return [parallel(x).detach() for x in loader]

    def average(generator):
        for param in generator.parameters():
            param.requires_grad = False
        return nn.DataParallel(generator)
    """


def test_ptl102_silent_for_an_eval_chained_to_the_wrap_or_a_frozen_model(cli, tmp_path):
    # in a file that trains: `.eval()` chained to the wrap and its move, in a function
    # that trains nothing; a model whose every parameter is frozen, which DDP refuses
    write(tmp_path / "features.py", FEATURES)
    write(tmp_path / "unchained.py", FEATURES.replace(".to(device).eval()", ".to(device)"))
    write(tmp_path / "thawed.py", FEATURES + "\n    def thaw(m):\n        m.requires_grad_()\n")
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    found = sorted(tuple(line.split(":")[:2]) for line in proc.stdout.splitlines()
                   if "PTL102" in line)
    assert found == [("thawed.py", "17"), ("unchained.py", "11")]


def test_ptl101_and_ptl230_fix_a_legacy_constructor_into_one_factory(cli, tmp_path):
    script = write(tmp_path / "legacy.py", """\
        import torch

        def mask(b, device):
            return torch.Tensor(b, b).fill_(1).to(device)
        """)
    only = cli(str(script), "--select", "PTL101", "--fix", "--unsafe-fixes")
    assert only.returncode == 1  # reported; its fix waits for PTL230's
    assert "torch.Tensor(b, b).fill_(1).to(device)" in script.read_text()
    both = cli(str(script), "--select", "PTL101,PTL230", "--fix")
    assert both.returncode == 0, both.stdout
    assert "return torch.full((b, b), 1.0, device=device)" in script.read_text()


WRAP = """\
    import torch.nn as nn

    def wrap(model):
        model = nn.DataParallel(model.cuda())
        return model
    """


def test_ptl102_offers_no_fix_in_a_notebook(cli, tmp_path):
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": textwrap.dedent(WRAP)}]
    notebook = tmp_path / "train.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                    "nbformat_minor": 5}))
    before = notebook.read_bytes()
    proc = cli(str(notebook), "--select", "PTL102", "--output-format", "json")
    [finding] = json.loads(proc.stdout)
    assert (finding["cell"], finding["code"], finding["fix"]) == (1, "PTL102", None)  # cells from 1
    assert cli(str(notebook), "--select", "PTL102", "--fix", "--unsafe-fixes").returncode == 1
    assert notebook.read_bytes() == before
    script = write(tmp_path / "train.py", WRAP)  # the same code in a script has one
    [finding] = json.loads(cli(str(script), "--select", "PTL102", "--output-format",
                               "json").stdout)
    assert finding["fix"]["applicability"] == "unsafe"


def test_ptl102_silent_in_test_files(cli, tmp_path):
    write(tmp_path / "tests" / "test_checkpoint.py", WRAP)
    write(tmp_path / "helpers_test.py", WRAP + "\n    def test_wrap():\n        wrap(None)\n")
    write(tmp_path / "src" / "model.py", WRAP)
    # named like a test, but neither a test framework nor a test: a script
    write(tmp_path / "multi_gpu_test.py", WRAP)
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line] == [
        "multi_gpu_test.py", "src/model.py"]


def test_ptl122_silent_in_test_files(cli, tmp_path):
    """Test code builds layers to test them (a BatchNorm frozen in eval mode)."""
    layers = "import torch.nn as nn\nm = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n"
    write(tmp_path / "tests" / "test_fuse.py", layers)
    write(tmp_path / "src" / "model.py", layers)
    proc = cli(".", "--select", "PTL122", "--output-format", "concise", cwd=tmp_path)
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if "PTL122" in line] == [
        "src/model.py"]


EVALUATES = """\
    import torch.nn as nn

    def evaluate(net, images, detect):
        net.eval()
        model = nn.DataParallel(net)
        return [detect(model, x) for x in images]
    """


def test_ptl102_silent_for_an_evaluation_script_only(cli, tmp_path):
    write(tmp_path / "evaluate.py", EVALUATES)
    write(tmp_path / "train.py", EVALUATES + "\n    def fit(model, opt):\n        opt.step()\n")
    write(tmp_path / "both.py", EVALUATES + "\n    def resume(net):\n        net.train()\n")
    # `.train(False)` is eval mode
    write(tmp_path / "frozen.py", EVALUATES + "\n    def freeze(net):\n        net.train(False)\n")
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "both.py", "train.py"]


def test_ptl102_a_script_that_only_hands_the_model_to_evaluation_functions(cli, tmp_path):
    script = """\
    import torch
    import torch.optim  # imported, never used: the file trains nothing itself
    from engine import {callee}

    def main(cfg, loader):
        model = torch.nn.DataParallel(build(cfg)).cuda()
        # define loss function (criterion) and optimizer
        {callee}(cfg, loader, model)
    """
    for callee in ("validate", "evaluate_accuracy", "test_epoch", "train", "fit", "run"):
        write(tmp_path / f"{callee}.py", script.format(callee=callee))
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    # a function named for training, or any other, may train the model it is given
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "fit.py", "run.py", "train.py"]


SAMPLES = """\
    import torch
    import torch.nn as nn

    def train(net, loader, opt):
        net.train()
        for x in loader:
            net(x).sum().backward()
            opt.step()

    def sample(net, ckpt, helper, n):
        model = nn.DataParallel(net)
        model.load_state_dict(torch.load(ckpt))
        helper.register(model)
        model.eval()
        with torch.no_grad():
            return model(torch.randn(n, 4))
    """


def test_ptl102_silent_for_an_evaluation_function_in_a_file_that_trains(cli, tmp_path):
    write(tmp_path / "sample.py", SAMPLES)
    # the model leaves the function: it may be trained elsewhere
    write(tmp_path / "returned.py", SAMPLES.replace("        with torch.no_grad():\n"
                                                    "            return model(torch.randn(n, 4))",
                                                    "        return model"))
    write(tmp_path / "stored.py", SAMPLES.replace("helper.register(model)", "helper.model = model"))
    # the function trains the model (its `.train()` alone only sets a mode)
    write(tmp_path / "trains.py", SAMPLES.replace("helper.register(model)",
                                                  "model(torch.randn(n, 4)).sum().backward()"))
    write(tmp_path / "mode.py", SAMPLES.replace("helper.register(model)", "model.train()"))
    # it steps something else: the wrapped model still only runs under no_grad
    write(tmp_path / "steps.py", SAMPLES.replace("helper.register(model)", "helper.step()"))
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "returned.py", "stored.py", "trains.py"]


FROZEN = """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def linear_eval(backbone, loader, device):
        classifier = nn.Linear(backbone.output_dim, 10).to(device)
        backbone = nn.DataParallel(backbone.to(device))
        classifier = nn.DataParallel(classifier)
        optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)
        for images, labels in loader:
            backbone.eval()
            with torch.no_grad():
                feature = backbone(images.to(device))
            loss = F.cross_entropy(classifier(feature), labels.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """


def test_ptl102_silent_for_a_frozen_model_in_a_file_that_trains(cli, tmp_path):
    """A backbone only run under no_grad whose parameters reach no optimizer: DDP
    would refuse it (no parameter requires grad) and has nothing to do for it."""
    write(tmp_path / "frozen.py", FROZEN)
    # frozen explicitly: iterating its parameters hands them to nothing
    write(tmp_path / "freezes.py", FROZEN.replace(
        "        for images, labels in loader:\n",
        "        for p in backbone.parameters():\n            p.requires_grad = False\n"
        "        for images, labels in loader:\n"))
    # its parameters go to the optimizer, or it runs with gradients
    write(tmp_path / "tuned.py", FROZEN.replace(
        "SGD(classifier.parameters()", "SGD([*classifier.parameters(), *backbone.parameters()]"))
    write(tmp_path / "grads.py", FROZEN.replace(
        "            with torch.no_grad():\n                feature", "            if True:\n                feature"))
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[:2] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        ["freezes.py", "8"], ["frozen.py", "8"], ["grads.py", "7"], ["grads.py", "8"],
        ["tuned.py", "7"], ["tuned.py", "8"]]


def test_ptl102_the_parts_of_a_model_in_eval_mode_in_a_script_that_only_evaluates(cli, tmp_path):
    parts = """\
    import torch

    def embed(model, batches):
        model.eval()
        model.cuda()
        for key, module in model._modules.items():
            model._modules[key] = torch.nn.DataParallel(module)
        for child in model.children():
            child = torch.nn.DataParallel(child)
        return [model.encode(b) for b in batches]
    """
    write(tmp_path / "embed.py", parts)
    write(tmp_path / "resumes.py", parts + "\n    def resume(model):\n        model.train()\n")
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[:2] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        ["resumes.py", "7"], ["resumes.py", "9"]]


def test_ptl102_a_prune_and_evaluate_script_and_a_wrap_never_run(cli, tmp_path):
    """An optimizer bound and never used trains nothing; a model wrapped only to
    load a checkpoint saved from a wrapped one (`module.` keys) never runs the
    wrapper; a part of a model put in eval mode in a script that never trains."""
    prune = """\
    import torch
    import torch.optim as optim

    def main(model, loader):
        model = torch.nn.DataParallel(model).cuda()
        optimizer = optim.SGD(model.parameters(), lr=0.1)
        test(loader, model)
        for m in model.modules():
            m.weight.data.mul_(0.5)
        test(loader, model)
    """
    write(tmp_path / "prune.py", prune)
    write(tmp_path / "steps.py", prune + "\n    def fit(opt):\n        opt.step()\n")
    write(tmp_path / "used.py", prune.replace("test(loader, model)\n        for",
                                              "test(loader, model, optimizer)\n        for"))
    reference = """\
    import torch

    def train(model, ref, loader, opt):
        ref = torch.nn.DataParallel(ref).cuda()
        ref.load_state_dict(torch.load("ref.pt"))
        for a, b in zip(model.modules(), ref.modules()):
            a.weight.data.copy_(b.weight.data)
        for x, y in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    """
    write(tmp_path / "reference.py", reference)
    write(tmp_path / "runs.py", reference.replace("opt.step()", "opt.step()\n            ref(x)"))
    # a wrap not used at all (the rule's own example) is reported
    write(tmp_path / "alone.py", "import torch\nnet = torch.nn.DataParallel(torch.nn.Linear(2, 2))\n")
    features = """\
    import torch

    def main(model, loader):
        model.features = torch.nn.DataParallel(model.features)
        model.cuda()
        test(model, loader)

    def test(model, loader):
        model.eval()
        return [model(x) for x in loader]
    """
    write(tmp_path / "features.py", features)
    write(tmp_path / "trains.py", features + "\n    def fit(model):\n        model.train()\n")
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "alone.py", "runs.py", "steps.py", "trains.py", "used.py"], proc.stdout


def test_ptl102_wrappers_that_never_run_and_wraps_distribution_handles(cli, tmp_path):
    """In files that train: a wrapper used only through `.module` (or unwrapped
    right after loading a checkpoint), one only shown and saved, a wrapped
    `ModuleList`, a wrap inside a LightningModule, and the fallback beside apex's
    DDP or a `local_rank` test are left alone; a wrapper also called is reported."""
    train = """\
    import torch
    import torch.nn as nn

    def fit(model, loader, opt):
        for x in loader:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    """
    write(tmp_path / "donor.py", train + """\

    def reload(self, opt):
        network = nn.DataParallel(Net(opt), device_ids=opt.gpus)
        network.module.load_state_dict(torch.load(opt.path, weights_only=True))
        self.network.module.decoder = network.module.decoder  # (`self.network` is another)
    """)
    write(tmp_path / "unwrapped.py", train + """\

    def load_checkpoint(model, path):
        checkpoint = torch.load(path, weights_only=True)
        if "module." in next(iter(checkpoint)):
            model = nn.DataParallel(model)
            model.load_state_dict(checkpoint)
            model = model.module  # the wrapper only read the `module.` keys
        return model
    """)
    write(tmp_path / "saved.py", train + """\

    def save(path):
        net = nn.DataParallel(nn.Linear(10, 1).cuda())  # shown and saved, never run
        net
        torch.save(net.state_dict(), path)
        torch.save(net.module.state_dict(), path + ".plain")
    """)
    write(tmp_path / "called.py", train + """\

    def reload(self, opt, x):
        donor = nn.DataParallel(Net(opt), device_ids=opt.gpus)
        donor.module.load_state_dict(torch.load(opt.path, weights_only=True))
        return donor(x)
    """)
    write(tmp_path / "losses.py", train + """\

    class Loss(nn.Module):
        def __init__(self, args):
            super().__init__()
            self.loss_module = nn.ModuleList()
            self.loss_module.append(nn.L1Loss())
            if args.n_gpus > 1:
                self.loss_module = nn.DataParallel(self.loss_module, range(args.n_gpus))
            self.heads = nn.DataParallel(nn.ModuleDict({"a": nn.Linear(2, 2)}))
    """)
    write(tmp_path / "lightning.py", train + """\
    import pytorch_lightning as pl

    class Episodic(pl.LightningModule):
        def __init__(self, features, data_parallel=False):
            super().__init__()
            self.features = features
            if data_parallel and torch.cuda.device_count() > 1:
                self.features = nn.DataParallel(self.features)

    class MAML(LightningEpisodicModule):
        def meta_learn(self, batch):
            learner = self.model.clone()
            learner.module = nn.DataParallel(learner.module)
            return learner(batch)
    """)
    write(tmp_path / "apex.py", train + """\
    from apex.parallel import DistributedDataParallel as DDP

    def wrap(self):
        if self.local_rank != -1:
            if not self.fp16:
                self.model = DDP(self.model)
        elif self.n_gpu > 1:
            self.model = nn.DataParallel(self.model)

    def wrap_args(args, model):
        if args.local_rank != -1:
            print("distributed")
        elif args.n_gpu > 1:
            model = nn.DataParallel(model)
        return model
    """)
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "called.py"], proc.stdout

SCORER = """\
    import torch
    import torch.nn as nn

    def scores(loader, threshold, model):
        model.eval()
        with torch.no_grad():
            return [model(x) for x in loader]

    scorer = nn.DataParallel(Net().to("cuda"))
    scorer.load_state_dict(torch.load("net.pt"))
    model = Net().to("cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in loader:
        s = scores(loader, 0.5, scorer)
        loss = model(x).sum()
        loss.backward()
        opt.step()
    """


def test_ptl102_silent_for_a_model_handed_to_a_function_that_evaluates_it(cli, tmp_path):
    """A pretrained scorer handed to a function of the file that puts it in eval
    mode and trains nothing, in a file that trains another model."""
    write(tmp_path / "scorer.py", SCORER)
    write(tmp_path / "keyword.py", SCORER.replace("0.5, scorer)", "0.5, model=scorer)"))
    # the function trains, the model lands in another parameter, or is trained too
    write(tmp_path / "trains.py", SCORER.replace("model.eval()", "model.train()"))
    write(tmp_path / "slot.py", SCORER.replace("scores(loader, 0.5, scorer)",
                                               "scores(scorer, 0.5, loader)"))
    write(tmp_path / "tuned.py", SCORER.replace("SGD(model.parameters()",
                                                "SGD([*model.parameters(), *scorer.parameters()]"))
    # a function that only runs it under no_grad evaluates it too (feature extraction)
    no_eval = SCORER.replace("        model.eval()\n", "")
    write(tmp_path / "no_grad.py", no_eval)
    # not when it runs it with gradients as well, or hands it on
    write(tmp_path / "grads.py", no_eval.replace(
        "            return", "            first = model(x0)\n            return").replace(
        "with torch.no_grad():\n            first", "if True:\n            first"))
    write(tmp_path / "handed.py", no_eval.replace("[model(x) for", "[keep(model, x) for"))
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "grads.py", "handed.py", "slot.py", "trains.py", "tuned.py"], proc.stdout


def test_ptl102_reported_where_a_gpu_is_there_or_the_type_test_is_another(cli, tmp_path):
    write(tmp_path / "place.py", """\
        import torch
        import torch.nn as nn

        def place(net):
            if torch.cuda.is_available():
                net = nn.DataParallel(net).cuda()
            else:
                net = nn.DataParallel(net)
            if isinstance(net, nn.Linear):
                net = nn.DataParallel(net)
            return net
        """)
    proc = cli("place.py", "--select", "PTL102", "--output-format", "json", cwd=tmp_path)
    assert codes(proc) == [(6, "PTL102"), (10, "PTL102")]


CPU_LOOP = """\
    import torch

    # dtype = torch.cuda.FloatTensor  # uncomment this to run on the GPU
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in torch.randn(10, 4, 2):
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
    """


def test_ptl130_a_device_named_only_in_a_comment_or_seeded_is_no_device(cli, tmp_path):
    write(tmp_path / "cpu.py", CPU_LOOP)
    write(tmp_path / "gpu.py", CPU_LOOP.replace("model = torch.nn.Linear(2, 1)",
                                                "model = torch.nn.Linear(2, 1).cuda()"))
    # seeding the GPU's generators (as a seed helper does, GPU or not) uses no GPU
    write(tmp_path / "seeded.py", CPU_LOOP.replace(
        "model = torch.nn.Linear(2, 1)",
        "torch.cuda.manual_seed_all(0); torch.cuda.manual_seed(0); model = torch.nn.Linear(2, 1)"))
    # so does asking whether there is one, unless the answer moves something
    write(tmp_path / "asks.py", CPU_LOOP.replace(
        "model = torch.nn.Linear(2, 1)", "print(torch.cuda.is_available()); model = torch.nn.Linear(2, 1)"))
    write(tmp_path / "uses.py", CPU_LOOP.replace(
        "model = torch.nn.Linear(2, 1)",
        "model = torch.nn.Linear(2, 1)\n    if torch.cuda.is_available(): model.cuda()"))
    # a factory that follows a tensor's device names none; a setting's device does
    follows = "next_value = torch.zeros(1, device=x.device); model = torch.nn.Linear(2, 1)"
    write(tmp_path / "follows.py", CPU_LOOP.replace("model = torch.nn.Linear(2, 1)", follows))
    write(tmp_path / "setting.py", CPU_LOOP.replace(
        "model = torch.nn.Linear(2, 1)", "model = torch.nn.Linear(2, 1).to(args.device)"))
    write(tmp_path / "helper.py", CPU_LOOP.replace(
        "model = torch.nn.Linear(2, 1)", "model = torch.nn.Linear(2, 1).to(default_device())"))
    # a test runs a few steps
    gpu = CPU_LOOP.replace("model = torch.nn.Linear(2, 1)", "model = torch.nn.Linear(2, 1).cuda()")
    write(tmp_path / "tests" / "test_loop.py", gpu)
    write(tmp_path / "loop_test.py", gpu + "\n    def test_loop():\n        assert True\n")
    write(tmp_path / "unit_test.py", "    import unittest\n" + gpu)
    # a script named like a test, without a test framework or a test: an experiment
    write(tmp_path / "mnist_test.py", gpu)
    proc = cli(".", "--select", "PTL130", "--output-format", "json", cwd=tmp_path)
    assert [(f["filename"].rsplit("/", 1)[-1], f["location"]["line"])
            for f in json.loads(proc.stdout)] == [
        ("gpu.py", 11), ("helper.py", 11), ("mnist_test.py", 11), ("setting.py", 11),
        ("uses.py", 12)]


def test_ptl130_a_value_the_if_test_already_read_is_read_again_for_free(cli, tmp_path):
    """`if loss.item() < limit: step, else: print(loss.item())`: the test waits for
    the device (reported); the read in the branch has nothing new to wait for,
    unless a backward pass or step comes first there."""
    write(tmp_path / "skip.py", """\
    import torch

    model = torch.nn.Linear(2, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in torch.randn(10, 4, 2).cuda():
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        if loss.item() < 10:
            loss.backward()
            optimizer.step()
            print(loss.item())
        else:
            print("skipped", loss.item())
    """)
    proc = cli(".", "--select", "PTL130", "--output-format", "json", cwd=tmp_path)
    assert [f["location"]["line"] for f in json.loads(proc.stdout)] == [8, 11]


LOOP_CELL = """\
def training_loop(model, optimizer, batches):
    for x in batches:
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())
"""


def _notebook(path: Path, *cells: str) -> Path:
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
        for c in cells]}), encoding="utf-8")
    return path


def test_ptl130_in_a_notebook_only_cells_run_before_the_loop_or_calling_it_count(cli, tmp_path):
    setup = ("import torch\nmodel = torch.nn.Linear(2, 1)\n"
             "opt = torch.optim.SGD(model.parameters(), 0.1)\n")
    call = "training_loop(model, opt, torch.randn(10, 4, 2))\n"
    device = "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
    moved = LOOP_CELL.replace("model(x)", "model(x.to(device))")
    # the loop runs on the CPU; a later cell picks a device for the next version of it
    _notebook(tmp_path / "book.ipynb", setup, LOOP_CELL, call, device, moved,
              "model.to(device)\n" + call)
    # the device is picked in a cell that calls the loop defined before it
    _notebook(tmp_path / "later.ipynb", setup, LOOP_CELL, device + "model.to(device)\n" + call)
    # no cell that runs the loop mentions a device
    _notebook(tmp_path / "cpu.ipynb", setup, LOOP_CELL, call, device)
    # a loop in top-level code, after the cell that picks the device
    _notebook(tmp_path / "top.ipynb", setup, device,
              LOOP_CELL.replace("def training_loop(model, optimizer, batches):\n", "batches = []\n")
              .replace("\n    ", "\n").replace("optimizer.", "opt.").lstrip())
    proc = cli(".", "--select", "PTL130", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(": PTL130")[0] for line in proc.stdout.splitlines()
                  if "PTL130" in line) == [
        "book.ipynb:cell 5:7:15", "later.ipynb:cell 2:7:15", "top.ipynb:cell 3:7:11"]


PREDICT = """\
    import torch
    from torch.utils.data import DataLoader

    def predict(model, data, device="cpu"):
        # model.to("cuda:1")  # for the second GPU
        loader = DataLoader(data, batch_size=256)
        outputs = []
        for x in loader:
            outputs.append(model(x.to(device)))
        return outputs
    """


def test_ptl132_cuda_named_only_in_a_comment_is_no_gpu(cli, tmp_path):
    write(tmp_path / "cpu.py", PREDICT)
    write(tmp_path / "gpu.py", PREDICT.replace('device="cpu"', 'device="cuda"'))
    # torch's accelerator API names the GPU too; accelerate's `accelerator` object does not
    write(tmp_path / "torch_accelerator.py", PREDICT.replace(
        'device="cpu"', "device=torch.accelerator.current_accelerator()"))
    write(tmp_path / "accelerate.py", PREDICT.replace('device="cpu"', "device=accelerator.device"))
    proc = cli(".", "--select", "PTL132", "--output-format", "json", cwd=tmp_path)
    assert sorted((f["filename"].rsplit("/", 1)[-1], f["location"]["line"])
                  for f in json.loads(proc.stdout)) == [("gpu.py", 6), ("torch_accelerator.py", 6)]


FID = """\
    import torch
    from pytorch_fid.inception import InceptionV3


    def get_activations(images, model, batch_size=64):
        model.eval()
        out = []
        for i in range(0, len(images), batch_size):
            out.append(model(torch.from_numpy(images[i:i + batch_size]))[0])
        return out


    def fid(images):
        return get_activations(images, InceptionV3([3]))
    """


def test_ptl032_silent_for_the_frozen_inception_of_a_fid_script(cli, tmp_path):
    """pytorch-fid's InceptionV3 freezes its parameters unless built with
    `requires_grad=True`; FID scripts hand it from function to function, and
    projects copy its module along as `inception`."""
    write(tmp_path / "fid_score.py", FID)
    write(tmp_path / "copied.py", FID.replace("pytorch_fid.inception", "inception"))
    write(tmp_path / "trainable.py", FID.replace("InceptionV3([3])",
                                                 "InceptionV3([3], requires_grad=True)"))
    write(tmp_path / "positional.py", FID.replace("InceptionV3([3])",
                                                  "InceptionV3([3], True, True, True)"))
    write(tmp_path / "options.py", FID.replace("InceptionV3([3])", "InceptionV3([3], **opts)"))
    write(tmp_path / "other.py", FID.replace("pytorch_fid.inception", "torchvision.models"))
    proc = cli(".", "--select", "PTL032", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL032" in line) == [
        "options.py", "other.py", "positional.py", "trainable.py"], proc.stdout


ONE_GPU = """\
    import os

    import torch
    import torch.nn as nn

    os.environ["CUDA_VISIBLE_DEVICES"] = "0"


    def train(net, loader, optimizer):
        net = nn.DataParallel(net.cuda())
        for x in loader:
            net(x.cuda()).sum().backward()
            optimizer.step()
    """


def test_ptl102_silent_where_the_file_makes_one_gpu_visible(cli, tmp_path):
    """With one visible GPU, or one in `device_ids`, `DataParallel` runs the model
    as it is (a fixture's good.py cannot show it: a file that trains)."""
    write(tmp_path / "one.py", ONE_GPU)
    write(tmp_path / "two.py", ONE_GPU.replace('"0"', '"0,1"'))
    write(tmp_path / "chosen.py", ONE_GPU.replace('"0"', "args.gpus"))
    write(tmp_path / "also_read.py", ONE_GPU + '    print(os.environ["CUDA_VISIBLE_DEVICES"])\n')
    unset = ONE_GPU.replace('os.environ["CUDA_VISIBLE_DEVICES"] = "0"', "")
    write(tmp_path / "listed_one.py", unset.replace("net.cuda())", "net.cuda(), device_ids=[0])"))
    write(tmp_path / "listed_two.py", unset.replace("net.cuda())",
                                                    "net.cuda(), device_ids=[0, 1])"))
    proc = cli(".", "--select", "PTL102", "--output-format", "concise", cwd=tmp_path)
    assert sorted(line.split(":")[0] for line in proc.stdout.splitlines() if "PTL102" in line) == [
        "also_read.py", "chosen.py", "listed_two.py", "two.py"], proc.stdout


def test_ptl032_a_model_put_in_eval_mode_by_train_false_alone(cli, tmp_path):
    """`model.train(False)` is eval mode: a file that never writes `.eval()` is read too."""
    write(tmp_path / "predict.py", """\
    import torch

    def predict(model, loader):
        model.train(False)
        for inputs in loader:
            print(model(inputs.cuda()).cpu())
    """)
    proc = cli(".", "--select", "PTL032", "--output-format", "json", cwd=tmp_path)
    assert codes(proc) == [(6, "PTL032")]


JITTOR = """\
    import jittor as jt

    def test(model, loader):
        model.eval()
        for image, gt in loader:
            print(model(image).shape)
    """


def test_ptl032_silent_in_a_file_of_another_framework(cli, tmp_path):
    # Jittor's `model.eval()` and `jt.no_grad()` are not torch's: a file that imports
    # it and never names torch is left alone; one that also uses torch is not
    write(tmp_path / "jittor_test.py", JITTOR)
    write(tmp_path / "mixed.py",
          JITTOR.replace("import jittor as jt", "import jittor as jt\n    import torch"))
    proc = cli(".", "--select", "PTL032", "--output-format", "concise", cwd=tmp_path)
    assert [line.split(":")[0] for line in proc.stdout.splitlines() if "PTL032" in line] == [
        "mixed.py"]


FID_FEATURES = """\
    import torch
    from .inception import InceptionV3


    def activations(model, batches):
        model.eval()
        return [model(batch) for batch in batches]


    def features(batches):
        return activations(InceptionV3([3]), batches)
    """


def test_ptl032_a_copied_inception_imported_relatively_and_test_files(cli, tmp_path):
    # pytorch-fid's InceptionV3 is frozen, also from `from .inception import ...`
    script = write(tmp_path / "pkg" / "fid.py", FID_FEATURES)
    assert codes(cli(str(script), "--select", "PTL032", "--output-format", "json")) == []
    other = FID_FEATURES.replace("from .inception", "from .models")
    write(tmp_path / "pkg" / "fid.py", other)
    assert codes(cli(str(script), "--select", "PTL032", "--output-format", "json")) == [
        (7, "PTL032")]
    # a test runs a model to check it, in a test file of a framework or a tests folder
    for name in ("test_fid.py", "tests/fid.py"):
        test = write(tmp_path / name, "import pytest\n" + textwrap.dedent(other))
        assert codes(cli(str(test), "--select", "PTL032", "--output-format", "json")) == [], name
