"""PTL004 stand-in: gradients cleared between backward() and step()."""
import torch
import torch.nn as nn


def main(device="cpu", steps=10):
    torch.manual_seed(0)
    model = nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = torch.randn(32, 4), torch.randn(32, 1)
    x, y = inputs.to(device), targets.to(device)
    initial = [p.detach().clone() for p in model.parameters()]
    losses = []
    for _ in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.zero_grad()  # expect: PTL004
        optimizer.step()
        losses.append(loss.item())
    return {"initial": initial, "params": [p.detach() for p in model.parameters()],
            "losses": torch.tensor(losses)}
