"""PTL001 stand-in: an evaluation loop (no `torch.no_grad()`) keeps every loss."""
import torch
import torch.nn as nn


def main(device="cpu", steps=8):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
    criterion = nn.CrossEntropyLoss()
    inputs = torch.randn(steps, 64, 256)
    targets = torch.randint(0, 10, (steps, 64))
    losses = []
    for x, y in zip(inputs.to(device), targets.to(device)):
        loss = criterion(model(x), y)
        losses.append(loss.detach())  # expect: PTL001
    return {"losses": torch.stack(losses)}
