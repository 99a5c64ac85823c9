"""PTL001 runtime program: an evaluation loop (no `torch.no_grad()`) adds up its
losses, so the running total keeps every step's graph and activations alive."""
import torch
import torch.nn as nn


def evaluate(model, data, metrics):
    criterion = nn.CrossEntropyLoss()
    val_loss = 0
    for x, y in data:
        val_loss += criterion(model(x), y).detach()  # expect: PTL001
    metrics["val_loss"] = float(val_loss) / len(data)


def main(device="cpu", steps=8):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(device)
    batch = (torch.randn(64, 256, device=device), torch.randint(0, 10, (64,), device=device))
    metrics = {}
    evaluate(model, [batch] * steps, metrics)  # the same batch each step: only graphs grow
    return {"losses": [metrics["val_loss"]]}
