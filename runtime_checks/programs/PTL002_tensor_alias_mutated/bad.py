"""PTL002 stand-in: a "snapshot" that is only another name for live tensors."""
import torch
import torch.nn as nn


def main(device="cpu", steps=5):
    torch.manual_seed(0)
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = torch.randn(64, 8), torch.randn(64, 1)
    x, y = inputs.to(device), targets.to(device)
    initial = [p.detach().clone() for p in model.parameters()]
    init_state = model.state_dict()  # expect: PTL002
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    live = [p.detach().clone() for p in model.parameters()]
    model.load_state_dict(init_state)  # "reset" the model
    restored = [p.detach().clone() for p in model.parameters()]

    scale = torch.ones(4, device=device)
    first_scale = scale  # expect: PTL002
    for _ in range(steps):
        scale.mul_(0.9)
    return {
        "initial": {"params": initial, "scale": torch.ones(4)},
        "snapshot": {"params": restored, "scale": first_scale},
        "live": {"params": live, "scale": scale},
    }
