"""PTL003 stand-in: a training loop that never clears the gradients."""
import torch
import torch.nn as nn


def main(device="cpu", steps=5):
    torch.manual_seed(0)
    model = nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs, targets = torch.randn(steps, 16, 4), torch.randn(steps, 16, 1)
    for x, y in zip(inputs.to(device), targets.to(device)):  # expect: PTL003
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return {"params": [p.detach() for p in model.parameters()]}
