"""PTL101 stand-in: tensors built on the CPU, then moved to the device."""
import torch


def main(device="cpu", repeats=10):
    for _ in range(repeats):
        positions = torch.arange(4096, device=device)  # expect: PTL101
        mask = torch.ones(512, 512, device=device)  # expect: PTL101
        identity = torch.eye(512, device=device)  # expect: PTL101
        half = torch.zeros(256, 256, device=device, dtype=torch.float16)  # expect: PTL101
    return {"positions": positions, "mask": mask, "identity": identity, "half": half}
