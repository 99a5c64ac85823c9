"""PTL005 stand-in: backward() inside the autocast block."""
import torch
import torch.nn as nn


def main(device="cpu", steps=3):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # CPU autocast runs in bfloat16; CUDA in float16, with a GradScaler
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    scaler = torch.amp.GradScaler(device, enabled=device != "cpu")
    inputs, targets = torch.randn(steps, 32, 64), torch.randint(0, 10, (steps, 32))
    for x, y in zip(inputs.to(device), targets.to(device)):
        optimizer.zero_grad()
        with torch.autocast(device_type=device, dtype=dtype):
            loss = nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()  # expect: PTL005
        scaler.unscale_(optimizer)
        grads = [p.grad.detach().clone() for p in model.parameters()]
        scaler.step(optimizer)
        scaler.update()
    return {"loss": loss.detach().float(), "grads": grads,
            "params": [p.detach() for p in model.parameters()]}
